//! MXFP4: 32 FP4 (E2M1) values with a shared E8M0 scale, as ggml's `dequantize_row_mxfp4`.

use crate::blocks::{e8m0_to_f32_half, BlockMxfp4, KVALUES_MXFP4, QK};

/// x = kvalue(q) * 2^(e-128): the doubled E2M1 value times half the block scale (both factors
/// exact, so the product is the one rounding ggml does too).
pub fn dequantize_row_mxfp4(src: &[BlockMxfp4], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = e8m0_to_f32_half(b.e);
        for j in 0..QK / 2 {
            let x0 = KVALUES_MXFP4[(b.qs[j] & 0x0F) as usize];
            let x1 = KVALUES_MXFP4[(b.qs[j] >> 4) as usize];
            y[j] = x0 as f32 * d;
            y[j + QK / 2] = x1 as f32 * d;
        }
    }
}
