//! The 256-element super-block formats (Q2_K ... Q8_K), in ggml's element order.

use crate::blocks::{
    k4_scale_min, q3k_scales, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K,
};

/// Each byte of `qs` holds 4 two-bit quants; 128-element halves use 32 bytes, and within a
/// half the shift 2*j selects the 32-element group j (two sub-blocks of 16).
pub fn dequantize_row_q2_k(src: &[BlockQ2K], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK_K, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        let min = b.dmin.to_f32();
        for half in 0..2 {
            let q = &b.qs[32 * half..32 * half + 32];
            for j in 0..4 {
                let shift = 2 * j;
                for (part, qpart) in q.chunks_exact(16).enumerate() {
                    let sc = b.scales[8 * half + 2 * j + part];
                    let dl = d * (sc & 0x0F) as f32;
                    let ml = min * (sc >> 4) as f32;
                    let out = &mut y[128 * half + 32 * j + 16 * part..][..16];
                    for (y, &q) in out.iter_mut().zip(qpart) {
                        *y = dl * ((q >> shift) & 3) as f32 - ml;
                    }
                }
            }
        }
    }
}

/// As Q2_K for the low 2 bits; bit j of `hmask[l]` is the high bit of element 32*j + l, and a
/// CLEAR high bit means "subtract 4".
pub fn dequantize_row_q3_k(src: &[BlockQ3K], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK_K, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d_all = b.d.to_f32();
        let scales = q3k_scales(&b.scales);
        for half in 0..2 {
            let q = &b.qs[32 * half..32 * half + 32];
            for j in 0..4 {
                let shift = 2 * j;
                let m = 1u8 << (4 * half + j);
                for part in 0..2 {
                    let dl = d_all * scales[8 * half + 2 * j + part] as f32;
                    for l in 16 * part..16 * part + 16 {
                        let low = ((q[l] >> shift) & 3) as i32;
                        let sub = if b.hmask[l] & m != 0 { 0 } else { 4 };
                        y[128 * half + 32 * j + l] = dl * (low - sub) as f32;
                    }
                }
            }
        }
    }
}

/// 64-element chunks: low nibbles of 32 bytes are sub-block 2c, high nibbles sub-block 2c+1.
pub fn dequantize_row_q4_k(src: &[BlockQ4K], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK_K, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        let min = b.dmin.to_f32();
        for (c, (q, y)) in
            b.qs.chunks_exact(32)
                .zip(y.chunks_exact_mut(64))
                .enumerate()
        {
            let (sc1, m1) = k4_scale_min(&b.scales, 2 * c);
            let (sc2, m2) = k4_scale_min(&b.scales, 2 * c + 1);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            for l in 0..32 {
                y[l] = d1 * (q[l] & 0x0F) as f32 - m1;
                y[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}

/// Q4_K plus a 5th bit: bit 2c of `qh[l]` for element l of chunk c, bit 2c+1 for element l+32.
pub fn dequantize_row_q5_k(src: &[BlockQ5K], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK_K, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        let min = b.dmin.to_f32();
        for (c, (ql, y)) in
            b.qs.chunks_exact(32)
                .zip(y.chunks_exact_mut(64))
                .enumerate()
        {
            let (sc1, m1) = k4_scale_min(&b.scales, 2 * c);
            let (sc2, m2) = k4_scale_min(&b.scales, 2 * c + 1);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let (u1, u2) = (1u8 << (2 * c), 2u8 << (2 * c));
            for l in 0..32 {
                let h1 = if b.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if b.qh[l] & u2 != 0 { 16 } else { 0 };
                y[l] = d1 * ((ql[l] & 0x0F) + h1) as f32 - m1;
                y[l + 32] = d2 * ((ql[l] >> 4) + h2) as f32 - m2;
            }
        }
    }
}

/// 128-element halves: `ql` (64 bytes) holds the low nibbles of four 32-element groups,
/// `qh` (32 bytes) their top 2 bits; x = d * scale * (q - 32).
pub fn dequantize_row_q6_k(src: &[BlockQ6K], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK_K, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for half in 0..2 {
            let ql = &b.ql[64 * half..64 * half + 64];
            let qh = &b.qh[32 * half..32 * half + 32];
            let sc = &b.scales[8 * half..8 * half + 8];
            let y = &mut y[128 * half..128 * half + 128];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                y[l] = d * sc[is] as f32 * q1 as f32;
                y[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                y[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                y[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}

pub fn dequantize_row_q8_k(src: &[BlockQ8K], dst: &mut [f32]) {
    debug_assert_eq!(src.len() * QK_K, dst.len());
    for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = b.d * q as f32;
        }
    }
}
