//! Blocks → f32, exactly as ggml's `dequantize_row_*` (and so as `gguf.quants.dequantize`).

mod float;
mod k_quants;
mod legacy;
mod mxfp4;

pub use float::{dequantize_row_bf16, dequantize_row_f16};
pub use k_quants::{
    dequantize_row_q2_k, dequantize_row_q3_k, dequantize_row_q4_k, dequantize_row_q5_k,
    dequantize_row_q6_k, dequantize_row_q8_k,
};
pub use legacy::{
    dequantize_row_q4_0, dequantize_row_q4_1, dequantize_row_q5_0, dequantize_row_q5_1,
    dequantize_row_q8_0, dequantize_row_q8_1,
};
pub use mxfp4::dequantize_row_mxfp4;

use crate::blocks::blocks_from_bytes;
use crate::{checked_row_bytes, QuantError};
use tessera_gguf::GgmlType;

/// Dequantizes one row: `dst.len()` elements from `src`, which must be exactly that row's bytes.
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    use GgmlType::*;
    if !ty.is_supported() {
        return Err(QuantError::Unsupported(ty));
    }
    checked_row_bytes(ty, dst.len(), 1, src.len(), "source bytes")?;
    match ty {
        F32 => dst.copy_from_slice(&blocks_from_bytes::<f32>(src)),
        F16 => dequantize_row_f16(&blocks_from_bytes(src), dst),
        BF16 => dequantize_row_bf16(&blocks_from_bytes(src), dst),
        Q4_0 => dequantize_row_q4_0(&blocks_from_bytes(src), dst),
        Q4_1 => dequantize_row_q4_1(&blocks_from_bytes(src), dst),
        Q5_0 => dequantize_row_q5_0(&blocks_from_bytes(src), dst),
        Q5_1 => dequantize_row_q5_1(&blocks_from_bytes(src), dst),
        Q8_0 => dequantize_row_q8_0(&blocks_from_bytes(src), dst),
        Q8_1 => dequantize_row_q8_1(&blocks_from_bytes(src), dst),
        Q2_K => dequantize_row_q2_k(&blocks_from_bytes(src), dst),
        Q3_K => dequantize_row_q3_k(&blocks_from_bytes(src), dst),
        Q4_K => dequantize_row_q4_k(&blocks_from_bytes(src), dst),
        Q5_K => dequantize_row_q5_k(&blocks_from_bytes(src), dst),
        Q6_K => dequantize_row_q6_k(&blocks_from_bytes(src), dst),
        Q8_K => dequantize_row_q8_k(&blocks_from_bytes(src), dst),
        MXFP4 => dequantize_row_mxfp4(&blocks_from_bytes(src), dst),
        _ => return Err(QuantError::Unsupported(ty)),
    }
    Ok(())
}
