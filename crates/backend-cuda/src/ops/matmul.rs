//! Matmuls (`mul_mat.cu`, `mul_mat_id.cu`, `quantize.cu`): activations prepared as ggml's CPU
//! backend prepares them for the weight type (q8_0/q8_1 or q8_K blocks, f16 rounding), then
//! - up to [`DECODE_COLS`] columns: `matvec_<type>`, integer dot products with dp4a;
//! - more (prefill): the weight dequantized to f16 and cuBLAS's f16 GEMM with f32 accumulation
//!   on the f16 activations (llama.cpp's CUDA backend does the same for large batches), unless
//!   `TESSERA_CUDA_PREFILL=int`: then the matvec kernels (4 columns per launch row) give ggml's
//!   quantized-activation numbers for batches too, slower.

use crate::device::{grid_2d, Arg, DevBuf, Queue};
use crate::error::CudaError;
use crate::weights::{act_kind, ActKind, CudaWeight};
use tessera_gguf::GgmlType;

use Arg::{Ptr, U32};

/// Columns up to which a matmul is a matvec (decode, speculative verification).
pub const DECODE_COLS: usize = 8;
/// Whether a matmul of `n` columns goes through cuBLAS (see the module docs).
pub fn uses_gemm(n: usize) -> bool {
    static INT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    n > DECODE_COLS
        && !*INT.get_or_init(|| std::env::var("TESSERA_CUDA_PREFILL").is_ok_and(|v| v == "int"))
}

/// `WARPS_PER_BLOCK` and `NC` of mul_mat.cu.
const WARPS_PER_BLOCK: usize = 4;
const NC: usize = 4;

/// Scratch buffers of a graph's matmuls, sized by the caller for its largest.
pub struct MatmulScratch {
    /// Quantized activations (int8, the input's layout) and their per-32 (d, s) pairs.
    pub q: DevBuf,
    pub ds: DevBuf,
    /// f16-rounded activations (F16 weights), as f32.
    pub rounded: DevBuf,
    /// Prefill: the dequantized weight and the activations, f16.
    pub w16: DevBuf,
    pub x16: DevBuf,
    /// What `q`/`rounded` hold now: (graph node, format), so q, k and v (gate and up) quantize
    /// their shared input once.
    pub holds: Option<(u32, ActKind)>,
}

impl MatmulScratch {
    /// For inputs of at most `max_x` elements and prefill weights of at most `max_w16` elements.
    pub fn new(
        gpu: &impl Queue,
        max_x: usize,
        max_w16: usize,
        max_x16: usize,
    ) -> Result<MatmulScratch, CudaError> {
        Ok(MatmulScratch {
            q: gpu.alloc(max_x)?,
            ds: gpu.alloc(max_x.div_ceil(32) * 8)?,
            rounded: gpu.alloc(max_x * 4)?,
            w16: gpu.alloc(max_w16 * 2)?,
            x16: gpu.alloc(max_x16 * 2)?,
            holds: None,
        })
    }
}

/// The input of `w`'s matvec from graph node `node` (`x`, `n` floats): (activations, their
/// per-32 scales or 0).
pub fn prepare(
    gpu: &mut impl Queue,
    s: &mut MatmulScratch,
    w: &CudaWeight,
    node: u32,
    x: u64,
    n: usize,
) -> Result<(u64, u64), CudaError> {
    let kind = act_kind(w.ty);
    let out = match kind {
        ActKind::F32 => return Ok((x, 0)),
        ActKind::F16 => (s.rounded.ptr, 0),
        ActKind::Q8_0 | ActKind::Q8K => (s.q.ptr, s.ds.ptr),
    };
    if s.holds == Some((node, kind)) {
        return Ok(out);
    }
    // Quantized activations come in blocks; f16 rounding is per element (any row length).
    let block = match kind {
        ActKind::Q8K => 256,
        ActKind::Q8_0 => 32,
        _ => 1,
    };
    if !n.is_multiple_of(block) {
        return Err(CudaError::Unsupported(format!(
            "{} activations of {n} (blocks of {block})",
            w.name
        )));
    }
    let n_blocks = (n / block) as u32;
    match kind {
        ActKind::F16 => gpu.launch_1d(
            "quantize.cu",
            "round_f16",
            n,
            &[Ptr(x), Ptr(s.rounded.ptr), U32(n as u32)],
        )?,
        ActKind::Q8_0 => gpu.launch_1d(
            "quantize.cu",
            "quantize_q8_0",
            n,
            &[Ptr(x), Ptr(s.q.ptr), Ptr(s.ds.ptr), U32(n_blocks)],
        )?,
        ActKind::Q8K => {
            let (gx, gy) = grid_2d(n_blocks as usize);
            let args = [Ptr(x), Ptr(s.q.ptr), Ptr(s.ds.ptr), U32(n_blocks)];
            gpu.launch("quantize.cu", "quantize_q8_k", (gx, gy, 1), 256, &args)?
        }
        ActKind::F32 => unreachable!("returned above"),
    }
    s.holds = Some((node, kind));
    Ok(out)
}

/// `y = x · wᵀ` for `n` columns of `x` (graph node `node`, f32 at `x`) → `[m, n]` at `y`.
pub fn mul_mat(
    gpu: &mut impl Queue,
    s: &mut MatmulScratch,
    w: &CudaWeight,
    node: u32,
    x: u64,
    n: usize,
    y: u64,
) -> Result<(), CudaError> {
    let (k, m) = (w.k, w.n_rows);
    if uses_gemm(n) {
        return gemm_f16(gpu, s, w, x, n, y);
    }
    let (xa, ds) = prepare(gpu, s, w, node, x, k * n)?;
    // mul_mat.cu's matvec: a warp per row, or per 4 rows for quantized weights in decode.
    let rows_per_warp = if n == 1 && !matches!(act_kind(w.ty), ActKind::F32 | ActKind::F16) {
        4
    } else {
        1
    };
    let (gx, gy) = grid_2d(m.div_ceil(WARPS_PER_BLOCK * rows_per_warp));
    let grid = (gx, gy, n.div_ceil(NC) as u32);
    let args = [
        Ptr(w.buf.ptr),
        U32(w.row_bytes as u32),
        U32(k as u32),
        U32(m as u32),
        U32(n as u32),
        Ptr(xa),
        Ptr(ds),
        Ptr(y),
    ];
    gpu.launch(
        "mul_mat.cu",
        &format!("matvec_{}", w.suffix()?),
        grid,
        (32 * WARPS_PER_BLOCK) as u32,
        &args,
    )
}

/// Prefill: `w` dequantized to f16 (F16 weights as they are), `x` converted to f16, cuBLAS GEMM
/// into f32 `y`.
fn gemm_f16(
    gpu: &mut impl Queue,
    s: &mut MatmulScratch,
    w: &CudaWeight,
    x: u64,
    n: usize,
    y: u64,
) -> Result<(), CudaError> {
    let (k, m) = (w.k, w.n_rows);
    if m * k * 2 > s.w16.bytes || n * k * 2 > s.x16.bytes {
        return Err(CudaError::Unsupported(format!(
            "{}: prefill scratch too small",
            w.name
        )));
    }
    // An F16 weight already is the f16 matrix cuBLAS takes (rows of k, no padding).
    let w16 = if w.ty == GgmlType::F16 {
        w.buf.ptr
    } else {
        let threads = m * k.div_ceil(32);
        let (gx, gy) = grid_2d(threads.div_ceil(256));
        let args = [
            Ptr(w.buf.ptr),
            U32(w.row_bytes as u32),
            U32(k as u32),
            U32(m as u32),
            Ptr(s.w16.ptr),
        ];
        gpu.launch(
            "mul_mat.cu",
            &format!("dequant_f16_{}", w.suffix()?),
            (gx, gy, 1),
            256,
            &args,
        )?;
        s.w16.ptr
    };
    gpu.launch_1d(
        "quantize.cu",
        "to_f16",
        n * k,
        &[Ptr(x), Ptr(s.x16.ptr), U32((n * k) as u32)],
    )?;
    // Column-major: W is k × m, X is k × n, Y = Wᵀ X is m × n.
    gpu.gemm_f16(m, n, k, w16, s.x16.ptr, y)
}

/// Shape of a [`mul_mat_id`]: output `[m, n_used, n_tokens]`.
pub struct IdShape {
    pub m: usize,
    pub n_used: usize,
    pub n_tokens: usize,
    /// One input row per token (else one per slot).
    pub shared_x: bool,
}

/// The experts' matmul over the route's chosen experts (`w` is `[k, m, n_expert]`).
#[allow(clippy::too_many_arguments)]
pub fn mul_mat_id(
    gpu: &mut impl Queue,
    s: &mut MatmulScratch,
    w: &CudaWeight,
    node: u32,
    x: u64,
    route: u64,
    y: u64,
    sh: &IdShape,
) -> Result<(), CudaError> {
    let n_slots = sh.n_tokens * sh.n_used;
    let n_x = if sh.shared_x { sh.n_tokens } else { n_slots };
    let (xa, ds) = prepare(gpu, s, w, node, x, w.k * n_x)?;
    // One warp per output, 8 per block.
    let (gx, gy) = grid_2d((n_slots * sh.m).div_ceil(8));
    let args = [
        Ptr(w.buf.ptr),
        U32(w.row_bytes as u32),
        U32(w.k as u32),
        U32(sh.m as u32),
        U32(sh.n_used as u32),
        U32(n_slots as u32),
        U32(sh.shared_x as u32),
        Ptr(xa),
        Ptr(ds),
        Ptr(route),
        Ptr(y),
    ];
    gpu.launch(
        "mul_mat_id.cu",
        &format!("mul_mat_id_{}", w.suffix()?),
        (gx, gy, 1),
        256,
        &args,
    )
}
