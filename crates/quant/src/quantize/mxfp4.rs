//! MXFP4's reference quantizer, ggml's `quantize_row_mxfp4_ref` step for step.

use super::rounding::trunc_to_i32;
use crate::blocks::{e8m0_to_f32_half, BlockMxfp4, KVALUES_MXFP4, QK};

/// The code whose value `kvalue * d` is nearest to `x`; the first one on ties (so +0 before -0,
/// and code 0 for NaN, whose errors never compare smaller).
#[inline]
fn best_index(x: f32, d: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = (KVALUES_MXFP4[0] as f32 * d - x).abs();
    for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
        let err = (k as f32 * d - x).abs();
        if err < best_err {
            best = i as u8;
            best_err = err;
        }
    }
    best
}

/// The shared exponent: e = floor(log2(amax)) - 2 + 127, so that amax / 2^(e-127) lies in
/// [4, 8) and the largest FP4 magnitude (6) covers it to within rounding; 0 for an all-zero
/// block.
///
/// `log2` is the platform's `log2f` (glibc's on Linux, as in llama.cpp builds there): for an
/// amax just below a power of two a correctly rounded `log2f` already returns the integer,
/// and ggml then picks the larger exponent; exact integer arithmetic would differ there. The
/// float → uint8 conversion is C's on x86 (truncate, keep the low byte, see [`trunc_to_i32`]),
/// which only matters for degenerate blocks (subnormal or infinite amax).
#[inline]
fn shared_exponent(amax: f32) -> u8 {
    if amax > 0.0 {
        trunc_to_i32(amax.log2().floor() - 2.0 + 127.0) as u8
    } else {
        0
    }
}

/// x ≈ 2^(e-127) * fp4(q): shared exponent from the block's absolute maximum, then each value
/// to its nearest FP4 code.
pub fn quantize_row_mxfp4(src: &[f32], dst: &mut [BlockMxfp4]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let mut amax = 0.0f32;
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        y.e = shared_exponent(amax);
        let d = e8m0_to_f32_half(y.e);
        for j in 0..QK / 2 {
            let q0 = best_index(x[j], d);
            let q1 = best_index(x[j + QK / 2], d);
            y.qs[j] = q0 | (q1 << 4);
        }
    }
}
