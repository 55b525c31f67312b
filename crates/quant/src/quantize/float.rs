//! f32 → half-precision formats, rounding to nearest even as ggml does.

use half::{bf16, f16};

pub fn quantize_row_f16(src: &[f32], dst: &mut [f16]) {
    debug_assert_eq!(src.len(), dst.len());
    for (y, &x) in dst.iter_mut().zip(src) {
        *y = f16::from_f32(x);
    }
}

/// ggml's `ggml_compute_fp32_to_bf16`: NaNs are made quiet, everything else is rounded to
/// nearest even (overflowing to infinity).
#[inline]
pub fn f32_to_bf16(x: f32) -> bf16 {
    let u = x.to_bits();
    let h = if u & 0x7FFF_FFFF > 0x7F80_0000 {
        (u >> 16) | 64
    } else {
        (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    };
    bf16::from_bits(h as u16)
}

pub fn quantize_row_bf16(src: &[f32], dst: &mut [bf16]) {
    debug_assert_eq!(src.len(), dst.len());
    for (y, &x) in dst.iter_mut().zip(src) {
        *y = f32_to_bf16(x);
    }
}
