//! Attention over the KV cache (`attention.cu`): the batch's keys and values stored at their
//! positions, flash attention, and the K re-rotation of a context shift.

use tessera_core::graph::AttentionParams;

use crate::device::{grid_2d, struct_arg, Arg, Queue};
use crate::error::CudaError;
use crate::kv::LayerKv;
use crate::ops::RopeArgs;

use Arg::{Ptr, F32, U32};

/// The kernels' largest head size (`MAX_HEAD_DIM` in attention.cu, the engine's too).
const MAX_HEAD_DIM: usize = 512;

/// `AttnArgs` of attention.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct AttnArgs {
    n_head: u32,
    group: u32,
    hd: u32,
    dv: u32,
    n_tokens: u32,
    k_per_pos: u32,
    v_per_pos: u32,
    window: u32,
    scale: f32,
    softcap: f32,
}

/// Stores the batch's `k` and `v` (`n_tokens` rows) in `layer` at positions `*pos0 ..`.
pub fn store(
    gpu: &mut impl Queue,
    pos0: u64,
    k: u64,
    v: u64,
    layer: &LayerKv,
    n_tokens: usize,
) -> Result<(), CudaError> {
    for (x, cache, per_pos) in [
        (k, &layer.k, layer.k_per_pos()),
        (v, &layer.v, layer.v_per_pos()),
    ] {
        let args = [
            Ptr(pos0),
            Ptr(x),
            Ptr(cache.ptr),
            U32(per_pos as u32),
            U32(n_tokens as u32),
        ];
        gpu.launch_1d("attention.cu", "kv_store", per_pos * n_tokens, &args)?;
    }
    Ok(())
}

/// Causal attention of `q` `[head_dim, n_head, n_tokens]` over `layer`'s cache →
/// `[dv · n_head, n_tokens]`; `sinks` the sinks' address (0: none).
#[allow(clippy::too_many_arguments)]
pub fn attend(
    gpu: &mut impl Queue,
    pos0: u64,
    q: u64,
    layer: &LayerKv,
    sinks: u64,
    y: u64,
    p: &AttentionParams,
    n_tokens: usize,
) -> Result<(), CudaError> {
    let l = &layer.layout;
    if p.head_dim != l.head_dim_k || l.head_dim_k > MAX_HEAD_DIM || l.head_dim_v > MAX_HEAD_DIM {
        return Err(CudaError::Unsupported(format!(
            "attention heads of {}/{} (cache {}/{}, at most {MAX_HEAD_DIM})",
            p.head_dim, l.head_dim_v, l.head_dim_k, l.head_dim_v
        )));
    }
    if p.n_head_kv != l.n_head_kv || !p.n_head.is_multiple_of(p.n_head_kv) {
        return Err(CudaError::Unsupported(format!(
            "{} heads over {} kv heads",
            p.n_head, p.n_head_kv
        )));
    }
    let a = AttnArgs {
        n_head: p.n_head as u32,
        group: (p.n_head / p.n_head_kv) as u32,
        hd: l.head_dim_k as u32,
        dv: l.head_dim_v as u32,
        n_tokens: n_tokens as u32,
        k_per_pos: layer.k_per_pos() as u32,
        v_per_pos: layer.v_per_pos() as u32,
        window: p.window.unwrap_or(0) as u32,
        // With a cap, the scale is divided by it (as ggml folds them).
        scale: p.softcap.map_or(p.scale, |cap| p.scale / cap),
        softcap: p.softcap.unwrap_or(0.0),
    };
    let (gx, gy) = grid_2d(n_tokens * p.n_head);
    let args = [
        struct_arg(&a),
        Ptr(pos0),
        Ptr(q),
        Ptr(layer.k.ptr),
        Ptr(layer.v.ptr),
        Ptr(sinks),
        Ptr(y),
    ];
    gpu.launch("attention.cu", "flash_attn", (gx, gy, 1), 128, &args)
}

/// Context shift of one layer: positions `n_keep + n_discard .. n_keep + n_discard + n_moved`
/// move down to `n_keep ..`, keys re-rotated by `-n_discard`. Copies go through `scratch`
/// (at least the layer's moved K or V bytes) since the ranges overlap.
pub fn shift(
    gpu: &mut impl Queue,
    layer: &LayerKv,
    factors: u64,
    scratch: u64,
    n_keep: usize,
    n_discard: usize,
    n_moved: usize,
) -> Result<(), CudaError> {
    let src = n_keep + n_discard;
    let (kb, vb) = (layer.k_per_pos() * 2, layer.v_per_pos() * 2);
    gpu.copy(scratch, layer.k.ptr + (src * kb) as u64, n_moved * kb)?;
    let l = &layer.layout;
    let a = RopeArgs::new(&l.rope, l.head_dim_k, l.n_head_kv, n_moved)?;
    let args = [
        struct_arg(&a),
        Ptr(scratch),
        Ptr(factors),
        F32(-(n_discard as f32)),
        U32(n_keep as u32),
        Ptr(layer.k.ptr),
    ];
    gpu.launch_1d(
        "attention.cu",
        "kv_shift",
        layer.k_per_pos() * n_moved,
        &args,
    )?;
    gpu.copy(scratch, layer.v.ptr + (src * vb) as u64, n_moved * vb)?;
    gpu.copy(layer.v.ptr + (n_keep * vb) as u64, scratch, n_moved * vb)
}
