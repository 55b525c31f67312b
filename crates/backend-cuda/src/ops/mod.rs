//! Launching the kernels of `shaders/cuda/` for the graph's ops: each function checks what its
//! kernel cannot do and queues it on the device's stream. Buffers are device addresses (u64);
//! shapes are the graph's (ggml order: ne[0] is the row length).

pub mod attention;
pub mod matmul;

use tessera_core::graph::{Activation, Gating, MoeRouteParams, RopeMode, RopeParams};

use crate::device::{grid_2d, struct_arg, Arg, Queue};
use crate::error::CudaError;
use crate::weights::CudaWeight;

use Arg::{Ptr, F32, U32};

fn u32_of(n: usize, what: &str) -> Result<u32, CudaError> {
    u32::try_from(n).map_err(|_| CudaError::Unsupported(format!("{what} of {n} (past 2^32)")))
}

/// Embedding rows of the step's `n_tokens` token ids (at `tokens`), dequantized.
pub fn get_rows(
    gpu: &mut impl Queue,
    w: &CudaWeight,
    tokens: u64,
    n_tokens: usize,
    y: u64,
) -> Result<(), CudaError> {
    let name = format!("get_rows_{}", w.suffix()?);
    let chunks = w.k.div_ceil(32);
    let grid = (chunks.div_ceil(64) as u32, u32_of(n_tokens, "tokens")?, 1);
    let args = [
        Ptr(w.buf.ptr),
        U32(w.row_bytes as u32),
        U32(w.k as u32),
        Ptr(tokens),
        U32(n_tokens as u32),
        Ptr(y),
    ];
    gpu.launch("get_rows.cu", &name, grid, 64, &args)
}

/// rms_norm of `rows` rows of `width`, times the weight row `w` when given (0: none).
pub fn rms_norm(
    gpu: &mut impl Queue,
    x: u64,
    w: u64,
    y: u64,
    width: usize,
    rows: usize,
    eps: f32,
) -> Result<(), CudaError> {
    let (gx, gy) = grid_2d(rows);
    let args = [
        Ptr(x),
        Ptr(w),
        Ptr(y),
        U32(u32_of(width, "row")?),
        U32(rows as u32),
        F32(eps),
    ];
    gpu.launch("norm.cu", "rms_norm", (gx, gy, 1), 256, &args)
}

/// An element-wise kernel of `elementwise.cu` or `glu.cu` over `n` outputs: `name`'s
/// arguments are `inputs`, then y, then n, then `extra`.
pub fn elementwise(
    gpu: &mut impl Queue,
    file: &'static str,
    name: &str,
    inputs: &[u64],
    y: u64,
    n: usize,
    extra: Vec<Arg>,
) -> Result<(), CudaError> {
    let mut args: Vec<Arg> = inputs.iter().map(|&p| Ptr(p)).collect();
    args.push(Ptr(y));
    args.push(U32(u32_of(n, "elements")?));
    args.extend(extra);
    gpu.launch_1d(file, name, n, &args)
}

pub fn activation(
    gpu: &mut impl Queue,
    x: u64,
    act: Activation,
    y: u64,
    n: usize,
) -> Result<(), CudaError> {
    let code = match act {
        Activation::Silu => 0,
        Activation::Gelu => 1,
        Activation::Relu => 2,
    };
    elementwise(gpu, "glu.cu", "activation", &[x], y, n, vec![U32(code)])
}

/// `RopeArgs` of rope.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RopeArgs {
    pub head_dim: u32,
    pub n_heads: u32,
    pub n_tokens: u32,
    pub n_dims: u32,
    pub mode: u32,
    pub freq_scale: f32,
    /// `freq_base^(-2/n_dims)` by the host's powf (ggml's).
    pub theta_scale: f32,
    /// [`RopeParams::mscale`].
    pub attn_factor: f32,
    pub ext_factor: f32,
    pub corr0: f32,
    pub corr1: f32,
}

impl RopeArgs {
    pub fn new(
        p: &RopeParams,
        head_dim: usize,
        n_heads: usize,
        n_tokens: usize,
    ) -> Result<RopeArgs, CudaError> {
        if p.n_dims > head_dim || !p.n_dims.is_multiple_of(2) {
            return Err(CudaError::Unsupported(format!(
                "rope of {} dims in heads of {head_dim}",
                p.n_dims
            )));
        }
        Ok(RopeArgs {
            head_dim: head_dim as u32,
            n_heads: n_heads as u32,
            n_tokens: u32_of(n_tokens, "rope positions")?,
            n_dims: p.n_dims as u32,
            mode: match p.mode {
                RopeMode::Normal => 0,
                RopeMode::Neox => 1,
            },
            freq_scale: p.freq_scale,
            theta_scale: p.theta_scale(),
            attn_factor: p.mscale(),
            ext_factor: p.yarn.map_or(0.0, |y| y.ext_factor),
            corr0: p.yarn.map_or(0.0, |y| y.corr_dims[0]),
            corr1: p.yarn.map_or(0.0, |y| y.corr_dims[1]),
        })
    }
}

/// Rotary embedding of `x` `[head_dim, n_heads, n_tokens]` at positions `*pos0 + t`;
/// `factors` the frequency factors' address (0: none).
pub fn rope(
    gpu: &mut impl Queue,
    a: &RopeArgs,
    pos0: u64,
    x: u64,
    factors: u64,
    y: u64,
) -> Result<(), CudaError> {
    let n = (a.head_dim * a.n_heads) as usize * a.n_tokens as usize;
    gpu.launch_1d(
        "rope.cu",
        "rope",
        n,
        &[struct_arg(a), Ptr(pos0), Ptr(x), Ptr(factors), Ptr(y)],
    )
}

/// `RouteArgs` of moe.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RouteArgs {
    pub n_expert: u32,
    pub n_used: u32,
    pub n_tokens: u32,
    pub gating: u32,
    pub normalize: u32,
    pub scale: f32,
}

impl RouteArgs {
    pub fn new(
        n_expert: usize,
        n_tokens: usize,
        p: &MoeRouteParams,
    ) -> Result<RouteArgs, CudaError> {
        if p.n_used == 0 || p.n_used > 32 || p.n_used > n_expert {
            return Err(CudaError::Unsupported(format!(
                "{} of {n_expert} experts per token",
                p.n_used
            )));
        }
        Ok(RouteArgs {
            n_expert: n_expert as u32,
            n_used: p.n_used as u32,
            n_tokens: u32_of(n_tokens, "tokens")?,
            gating: match p.gating {
                Gating::Softmax => 0,
                Gating::Sigmoid => 1,
                Gating::SoftmaxAfterTopK => 2,
            },
            normalize: p.normalize as u32,
            scale: p.scale,
        })
    }
}

/// The router: `logits` `[n_expert, n_tokens]` → `[2 · n_used, n_tokens]`; `bias` the
/// selection bias's address (0: none).
pub fn moe_route(
    gpu: &mut impl Queue,
    logits: u64,
    bias: u64,
    y: u64,
    n_expert: usize,
    n_tokens: usize,
    p: &MoeRouteParams,
) -> Result<(), CudaError> {
    let a = RouteArgs::new(n_expert, n_tokens, p)?;
    let args = [struct_arg(&a), Ptr(logits), Ptr(bias), Ptr(y)];
    gpu.launch_1d("moe.cu", "moe_route", n_tokens, &args)
}

/// The greedy token of each of `rows` rows of `logits` into `ids`.
pub fn argmax(
    gpu: &mut impl Queue,
    logits: u64,
    ids: u64,
    width: usize,
    rows: usize,
) -> Result<(), CudaError> {
    let args = [Ptr(logits), Ptr(ids), U32(u32_of(width, "vocabulary")?)];
    gpu.launch(
        "sample.cu",
        "argmax",
        (u32_of(rows, "rows")?.max(1), 1, 1),
        256,
        &args,
    )
}

/// The sampling chain on row `row` of `logits`; (status, token) into `result`; `work` holds
/// 3 × `width` words.
pub fn sample_chain(
    gpu: &mut impl Queue,
    logits: u64,
    width: usize,
    row: usize,
    spec: u64,
    result: u64,
    work: u64,
) -> Result<(), CudaError> {
    let args = [
        Ptr(logits),
        U32(u32_of(width, "vocabulary")?),
        U32(row as u32),
        Ptr(spec),
        Ptr(result),
        Ptr(work),
    ];
    gpu.launch("sample.cu", "sample_chain", (1, 1, 1), 256, &args)
}
