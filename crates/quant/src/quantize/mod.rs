//! f32 → blocks, reproducing ggml's quantizers bit for bit.
//!
//! Weights: ggml's reference quantizers (`quantize_row_*_ref`, no importance matrix).
//! Activations (Q8_0, Q8_1, Q8_K, the formats every quantized matmul input goes through): the
//! quantizers of ggml's CPU backend as built for x86-64, on every platform ([`activation`]);
//! for Q8_K that is the reference function itself. [`quantize_row`] quantizes like the CPU
//! backend (activations), [`quantize_row_ref`] like `ggml_quantize_chunk` (model files); they
//! differ only for Q8_0 and Q8_1.

pub mod activation;
mod float;
mod k_quants;
mod legacy;
mod mxfp4;
mod rounding;
mod scale_search;
#[cfg(target_arch = "x86_64")]
mod x86_lanes;

pub use activation::{quantize_row_q8_0, quantize_row_q8_1};
pub use float::{f32_to_bf16, quantize_row_bf16, quantize_row_f16};
pub use k_quants::{
    quantize_row_q2_k, quantize_row_q3_k, quantize_row_q4_k, quantize_row_q5_k, quantize_row_q6_k,
    quantize_row_q8_k,
};
pub use legacy::{
    quantize_row_q4_0, quantize_row_q4_1, quantize_row_q5_0, quantize_row_q5_1,
    quantize_row_q8_0_ref, quantize_row_q8_1_ref,
};
pub use mxfp4::quantize_row_mxfp4;

use crate::blocks::with_blocks_mut;
use crate::{checked_row_bytes, QuantError};
use tessera_gguf::GgmlType;

/// Quantizes one row of `src.len()` elements into `dst`, which must be exactly that row's bytes,
/// the way ggml's CPU backend quantizes matmul inputs: Q8_0 and Q8_1 with the x86 SIMD
/// quantizers' arithmetic ([`activation`]), every other type with the reference quantizer.
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    quantize_row_with(ty, src, dst, false)
}

/// Quantizes one row with ggml's reference quantizers only (`quantize_row_*_ref`, what
/// `llama-quantize` and gguf-py write into model files). Same contract as [`quantize_row`].
pub fn quantize_row_ref(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    quantize_row_with(ty, src, dst, true)
}

fn quantize_row_with(
    ty: GgmlType,
    src: &[f32],
    dst: &mut [u8],
    reference: bool,
) -> Result<(), QuantError> {
    use GgmlType::*;
    if !ty.is_supported() {
        return Err(QuantError::Unsupported(ty));
    }
    checked_row_bytes(ty, src.len(), 1, dst.len(), "destination bytes")?;
    match ty {
        F32 => with_blocks_mut(dst, |y: &mut [f32]| y.copy_from_slice(src)),
        F16 => with_blocks_mut(dst, |y| quantize_row_f16(src, y)),
        BF16 => with_blocks_mut(dst, |y| quantize_row_bf16(src, y)),
        Q4_0 => with_blocks_mut(dst, |y| quantize_row_q4_0(src, y)),
        Q4_1 => with_blocks_mut(dst, |y| quantize_row_q4_1(src, y)),
        Q5_0 => with_blocks_mut(dst, |y| quantize_row_q5_0(src, y)),
        Q5_1 => with_blocks_mut(dst, |y| quantize_row_q5_1(src, y)),
        Q8_0 if reference => with_blocks_mut(dst, |y| quantize_row_q8_0_ref(src, y)),
        Q8_1 if reference => with_blocks_mut(dst, |y| quantize_row_q8_1_ref(src, y)),
        Q8_0 => with_blocks_mut(dst, |y| quantize_row_q8_0(src, y)),
        Q8_1 => with_blocks_mut(dst, |y| quantize_row_q8_1(src, y)),
        Q2_K => with_blocks_mut(dst, |y| quantize_row_q2_k(src, y)),
        Q3_K => with_blocks_mut(dst, |y| quantize_row_q3_k(src, y)),
        Q4_K => with_blocks_mut(dst, |y| quantize_row_q4_k(src, y)),
        Q5_K => with_blocks_mut(dst, |y| quantize_row_q5_k(src, y)),
        Q6_K => with_blocks_mut(dst, |y| quantize_row_q6_k(src, y)),
        Q8_K => with_blocks_mut(dst, |y| quantize_row_q8_k(src, y)),
        MXFP4 => with_blocks_mut(dst, |y| quantize_row_mxfp4(src, y)),
        _ => return Err(QuantError::Unsupported(ty)),
    }
    Ok(())
}
