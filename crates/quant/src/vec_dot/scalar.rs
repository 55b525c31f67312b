//! Plain scalar vec-dot kernels: the references every SIMD kernel is tested against.
//!
//! The math follows ggml's generic C kernels (`ggml-cpu/quants.c`): integer dot products inside a
//! block, then one float multiply-add per block (per super-block for the K-quants), summed in
//! block order. `n` is the row length in elements; at most `n / block_size` blocks are used, and
//! never more than both slices hold (the lengths are the caller's job, so only debug-asserted).

use crate::blocks::*;
use half::f16;

/// Number of blocks to process: `n / qk`, clipped to what both slices hold.
fn block_count(n: usize, qk: usize, w_len: usize, a_len: usize) -> usize {
    debug_assert_eq!(n % qk, 0, "row length {n} is not a multiple of {qk}");
    debug_assert!(
        w_len >= n / qk && a_len >= n / qk,
        "rows shorter than {n} elements"
    );
    (n / qk).min(w_len).min(a_len)
}

/// Unpacks the 12 packed bytes of Q4_K/Q5_K into 8 six-bit scales and 8 six-bit mins.
pub fn unpack_scales_mins_k4(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for j in 0..8 {
        if j < 4 {
            scales[j] = packed[j] & 63;
            mins[j] = packed[j + 4] & 63;
        } else {
            scales[j] = (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
            mins[j] = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
        }
    }
    (scales, mins)
}

/// Unpacks the 12 packed bytes of Q3_K into 16 signed scales (six bits, offset by 32).
pub fn unpack_scales_q3k(packed: &[u8; 12]) -> [i8; 16] {
    let mut scales = [0i8; 16];
    for (j, s) in scales.iter_mut().enumerate() {
        // Low 4 bits: nibble j%8 of bytes 0..8 (low nibbles first); high 2 bits: bytes 8..12.
        let low = if j < 8 {
            packed[j] & 0x0F
        } else {
            packed[j - 8] >> 4
        };
        let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        *s = ((low | (high << 4)) as i8) - 32;
    }
    scales
}

pub fn vec_dot_q4_0_q8_0(n: usize, x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32 - 8;
            let v1 = (x.qs[j] >> 4) as i32 - 8;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sumf
}

pub fn vec_dot_q4_1_q8_1(n: usize, x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32;
            let v1 = (x.qs[j] >> 4) as i32;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sumf
}

/// The 5th bit of element j (low nibbles) and j + 16 (high nibbles) of a Q5 block.
fn q5_high_bits(qh: [u8; 4], j: usize) -> (i32, i32) {
    let qh = u32::from_le_bytes(qh);
    (
        ((qh >> j) & 1) as i32 * 16,
        ((qh >> (j + 16)) & 1) as i32 * 16,
    )
}

pub fn vec_dot_q5_0_q8_0(n: usize, x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let (h0, h1) = q5_high_bits(x.qh, j);
            let v0 = ((x.qs[j] & 0x0F) as i32 | h0) - 16;
            let v1 = ((x.qs[j] >> 4) as i32 | h1) - 16;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32;
    }
    sumf
}

pub fn vec_dot_q5_1_q8_1(n: usize, x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let (h0, h1) = q5_high_bits(x.qh, j);
            let v0 = (x.qs[j] & 0x0F) as i32 | h0;
            let v1 = (x.qs[j] >> 4) as i32 | h1;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sumf
}

pub fn vec_dot_q8_0_q8_0(n: usize, x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let sumi: i32 =
            x.qs.iter()
                .zip(&y.qs)
                .map(|(&a, &b)| a as i32 * b as i32)
                .sum();
        sumf += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sumf
}

/// MXFP4 × Q8_0: the doubled E2M1 values against the activation quants, scaled by
/// d = d_a * 2^(e-128) (ggml's `ggml_vec_dot_mxfp4_q8_0_generic`).
pub fn vec_dot_mxfp4_q8_0(n: usize, x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let v0 = KVALUES_MXFP4[(x.qs[j] & 0x0F) as usize] as i32;
            let v1 = KVALUES_MXFP4[(x.qs[j] >> 4) as usize] as i32;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sumf += y.d.to_f32() * e8m0_to_f32_half(x.e) * sumi as f32;
    }
    sumf
}

pub fn vec_dot_q2_k_q8_k(n: usize, x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        // Sub-block s (16 elements) has scale scales[s] & 15 and min scales[s] >> 4.
        let summs: i32 = (0..16)
            .map(|s| y.bsums[s] as i32 * (x.scales[s] >> 4) as i32)
            .sum();
        let mut isum = 0i32;
        for i in 0..QK_K {
            // 128-element halves; within one, 2-bit field `shift` of byte l covers 32 elements.
            let (half, within) = (i / 128, i % 128);
            let (field, l) = (within / 32, within % 32);
            let q = (x.qs[half * 32 + l] >> (2 * field)) & 3;
            isum += (x.scales[i / 16] & 0x0F) as i32 * q as i32 * y.qs[i] as i32;
        }
        let dall = y.d * x.d.to_f32();
        let dmin = y.d * x.dmin.to_f32();
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

pub fn vec_dot_q3_k_q8_k(n: usize, x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let scales = unpack_scales_q3k(&x.scales);
        let mut isum = 0i32;
        for i in 0..QK_K {
            // Group g of 32 elements: 2-bit field g%4 of qs[32*(g/4) + l], high bit g of hmask[l].
            let (g, l) = (i / 32, i % 32);
            let low = ((x.qs[(g / 4) * 32 + l] >> (2 * (g % 4))) & 3) as i32;
            let high_unset = x.hmask[l] & (1 << g) == 0;
            let q = low - if high_unset { 4 } else { 0 };
            isum += scales[i / 16] as i32 * q * y.qs[i] as i32;
        }
        sumf += x.d.to_f32() * y.d * isum as f32;
    }
    sumf
}

/// Shared by Q4_K and Q5_K: `q(i)` is the unsigned quant of element i.
fn dot_k4_like(
    d: f16,
    dmin: f16,
    packed: &[u8; 12],
    y: &BlockQ8K,
    q: impl Fn(usize) -> i32,
) -> f32 {
    let (scales, mins) = unpack_scales_mins_k4(packed);
    let mut isum = 0i32;
    for i in 0..QK_K {
        isum += scales[i / 32] as i32 * q(i) * y.qs[i] as i32;
    }
    let summs: i32 = (0..8)
        .map(|s| mins[s] as i32 * (y.bsums[2 * s] as i32 + y.bsums[2 * s + 1] as i32))
        .sum();
    let d_all = d.to_f32() * y.d;
    let d_min = dmin.to_f32() * y.d;
    d_all * isum as f32 - d_min * summs as f32
}

pub fn vec_dot_q4_k_q8_k(n: usize, x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        // 64-element chunk c: low nibbles of qs[32c..32c+32], then the high nibbles.
        sumf += dot_k4_like(x.d, x.dmin, &x.scales, y, |i| {
            let (c, within) = (i / 64, i % 64);
            let byte = x.qs[c * 32 + within % 32];
            (if within < 32 { byte & 0x0F } else { byte >> 4 }) as i32
        });
    }
    sumf
}

pub fn vec_dot_q5_k_q8_k(n: usize, x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        // As Q4_K; the 5th bit of element i is bit i/32 of qh[i % 32].
        sumf += dot_k4_like(x.d, x.dmin, &x.scales, y, |i| {
            let (c, within) = (i / 64, i % 64);
            let byte = x.qs[c * 32 + within % 32];
            let low = if within < 32 { byte & 0x0F } else { byte >> 4 };
            let high = (x.qh[i % 32] >> (i / 32)) & 1;
            (low | (high << 4)) as i32
        });
    }
    sumf
}

pub fn vec_dot_q6_k_q8_k(n: usize, x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut isum = 0i32;
        for i in 0..QK_K {
            // 128-element halves; quarter g of a half: low 4 bits from ql[64h + 32(g%2) + l]
            // (low nibble for g < 2), high 2 bits from field g of qh[32h + l].
            let (h, within) = (i / 128, i % 128);
            let (g, l) = (within / 32, within % 32);
            let ql = x.ql[64 * h + 32 * (g % 2) + l];
            let low = if g < 2 { ql & 0x0F } else { ql >> 4 };
            let high = (x.qh[32 * h + l] >> (2 * g)) & 3;
            let q = (low | (high << 4)) as i32 - 32;
            isum += x.scales[i / 16] as i32 * q * y.qs[i] as i32;
        }
        sumf += x.d.to_f32() * y.d * isum as f32;
    }
    sumf
}

/// f16 · f16 with f32 products and an f32 running sum.
pub fn vec_dot_f16_f16(n: usize, x: &[f16], y: &[f16]) -> f32 {
    let n = block_count(n, 1, x.len(), y.len());
    x[..n]
        .iter()
        .zip(&y[..n])
        .fold(0.0f32, |acc, (a, b)| acc + a.to_f32() * b.to_f32())
}

pub fn vec_dot_f32_f32(n: usize, x: &[f32], y: &[f32]) -> f32 {
    let n = block_count(n, 1, x.len(), y.len());
    x[..n]
        .iter()
        .zip(&y[..n])
        .fold(0.0f32, |acc, (a, b)| acc + a * b)
}
