//! Reference quantizers of the 32-element formats, ggml's `quantize_row_*_ref` step for step
//! (same operation order, so the same f32 rounding and the same bytes).

use super::rounding::{round_half_away, trunc_to_i32};
use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};
use half::f16;

/// The element of largest magnitude, keeping its sign (the first one on ties).
#[inline]
fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

#[inline]
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

#[inline]
fn inverse_or_zero(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// x ≈ d * (q - 8) with d = max / -8, so the largest-magnitude element maps to q = 0.
pub fn quantize_row_q4_0(src: &[f32], dst: &mut [BlockQ4_0]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = signed_absmax(x) / -8.0;
        let id = inverse_or_zero(d);
        y.d = f16::from_f32(d);
        for j in 0..QK / 2 {
            // C: MIN(15, (int8_t)(x*id + 8.5f)); see trunc_to_i32 for the conversion.
            let q0 = (trunc_to_i32(x[j] * id + 8.5) as i8).min(15) as u8;
            let q1 = (trunc_to_i32(x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
            y.qs[j] = q0 | (q1 << 4);
        }
    }
}

/// x ≈ d * q + min with d = (max - min) / 15.
pub fn quantize_row_q4_1(src: &[f32], dst: &mut [BlockQ4_1]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse_or_zero(d);
        y.d = f16::from_f32(d);
        y.m = f16::from_f32(min);
        for j in 0..QK / 2 {
            let q0 = (trunc_to_i32((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let q1 = (trunc_to_i32((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
            y.qs[j] = q0 | (q1 << 4);
        }
    }
}

/// Packs 32 five-bit quants: low nibbles as in Q4, 5th bits into the little-endian `qh`.
#[inline]
fn pack_q5(q: &[u8; QK], qs: &mut [u8; QK / 2], qh: &mut [u8; 4]) {
    let mut high = 0u32;
    for j in 0..QK / 2 {
        qs[j] = (q[j] & 0x0F) | ((q[j + QK / 2] & 0x0F) << 4);
        high |= ((q[j] as u32 & 0x10) >> 4) << j;
        high |= ((q[j + QK / 2] as u32 & 0x10) >> 4) << (j + QK / 2);
    }
    *qh = high.to_le_bytes();
}

/// x ≈ d * (q - 16) with d = max / -16.
pub fn quantize_row_q5_0(src: &[f32], dst: &mut [BlockQ5_0]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = signed_absmax(x) / -16.0;
        let id = inverse_or_zero(d);
        y.d = f16::from_f32(d);
        let mut q = [0u8; QK];
        for (q, &x) in q.iter_mut().zip(x) {
            *q = (trunc_to_i32(x * id + 16.5) as i8).min(31) as u8;
        }
        pack_q5(&q, &mut y.qs, &mut y.qh);
    }
}

/// x ≈ d * q + min with d = (max - min) / 31.
pub fn quantize_row_q5_1(src: &[f32], dst: &mut [BlockQ5_1]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse_or_zero(d);
        y.d = f16::from_f32(d);
        y.m = f16::from_f32(min);
        let mut q = [0u8; QK];
        for (q, &x) in q.iter_mut().zip(x) {
            // ggml's C leaves this unclamped; (max - min) * id cannot reach 31.5 for finite
            // input, and gguf.quants clamps to 31, so the clamp changes nothing but safety.
            *q = (trunc_to_i32((x - min) * id + 0.5) as u8).min(31);
        }
        pack_q5(&q, &mut y.qs, &mut y.qh);
    }
}

/// Scale d = amax / 127 and quants roundf(x / d), shared by Q8_0 and Q8_1.
#[inline]
fn quantize_q8_block(x: &[f32], qs: &mut [i8; QK]) -> f32 {
    let mut amax = 0.0f32;
    for &v in x {
        amax = if amax > v.abs() { amax } else { v.abs() };
    }
    let d = amax / 127.0;
    let id = inverse_or_zero(d);
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = round_half_away(v * id) as i8;
    }
    d
}

/// ggml's `quantize_row_q8_0_ref` (what `llama-quantize` writes for Q8_0 tensors). Activations
/// go through [`super::quantize_row_q8_0`] instead, ggml's CPU-backend variant.
pub fn quantize_row_q8_0_ref(src: &[f32], dst: &mut [BlockQ8_0]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = quantize_q8_block(x, &mut y.qs);
        y.d = f16::from_f32(d);
    }
}

/// ggml's `quantize_row_q8_1_ref`: Q8_0 plus s = d * sum(q). Activations go through
/// [`super::quantize_row_q8_1`] instead, ggml's CPU-backend variant.
pub fn quantize_row_q8_1_ref(src: &[f32], dst: &mut [BlockQ8_1]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = quantize_q8_block(x, &mut y.qs);
        let sum: i32 = y.qs.iter().map(|&q| q as i32).sum();
        y.d = f16::from_f32(d);
        y.s = f16::from_f32(sum as f32 * d);
    }
}
