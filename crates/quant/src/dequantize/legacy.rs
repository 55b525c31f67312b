//! The 32-element block formats (Q4_0 ... Q8_1).
//!
//! In every 4-bit format element `j` of a block sits in the low nibble of `qs[j]` and element
//! `j + 16` in the high nibble; the 5th bits of Q5_* are bit `j` of the little-endian `qh`.

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};

pub fn dequantize_row_q4_0(src: &[BlockQ4_0], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for j in 0..QK / 2 {
            let x0 = (b.qs[j] & 0x0F) as i32 - 8;
            let x1 = (b.qs[j] >> 4) as i32 - 8;
            y[j] = x0 as f32 * d;
            y[j + QK / 2] = x1 as f32 * d;
        }
    }
}

pub fn dequantize_row_q4_1(src: &[BlockQ4_1], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        let m = b.m.to_f32();
        for j in 0..QK / 2 {
            y[j] = (b.qs[j] & 0x0F) as f32 * d + m;
            y[j + QK / 2] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// The 5-bit quant of element `j` (0..32) from the low nibbles and the high-bit word.
#[inline]
fn q5(qs: &[u8; QK / 2], qh: u32, j: usize) -> u8 {
    let low = if j < QK / 2 {
        qs[j] & 0x0F
    } else {
        qs[j - QK / 2] >> 4
    };
    low | ((((qh >> j) & 1) as u8) << 4)
}

pub fn dequantize_row_q5_0(src: &[BlockQ5_0], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        let qh = u32::from_le_bytes(b.qh);
        for (j, y) in y.iter_mut().enumerate() {
            *y = (q5(&b.qs, qh, j) as i32 - 16) as f32 * d;
        }
    }
}

pub fn dequantize_row_q5_1(src: &[BlockQ5_1], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        let m = b.m.to_f32();
        let qh = u32::from_le_bytes(b.qh);
        for (j, y) in y.iter_mut().enumerate() {
            *y = q5(&b.qs, qh, j) as f32 * d + m;
        }
    }
}

pub fn dequantize_row_q8_0(src: &[BlockQ8_0], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = q as f32 * d;
        }
    }
}

/// ggml has no Q8_1 → f32 (it is an activation format); `s` is redundant, so this is Q8_0's.
pub fn dequantize_row_q8_1(src: &[BlockQ8_1], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = q as f32 * d;
        }
    }
}
