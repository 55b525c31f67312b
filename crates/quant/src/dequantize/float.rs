//! Half-precision formats → f32 (both conversions are exact).

use half::{bf16, f16};

pub fn dequantize_row_f16(src: &[f16], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len());
    for (y, x) in dst.iter_mut().zip(src) {
        *y = x.to_f32();
    }
}

pub fn dequantize_row_bf16(src: &[bf16], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len());
    for (y, x) in dst.iter_mut().zip(src) {
        // bf16 is the top half of an f32.
        *y = f32::from_bits((x.to_bits() as u32) << 16);
    }
}
