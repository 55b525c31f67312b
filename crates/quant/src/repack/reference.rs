//! The repacked kernels' arithmetic, written plainly on ggml rows: the oracle every SIMD
//! kernel on the repacked layouts must match bit for bit.
//!
//! Per block (legacy) or super-block (K-quants) the weight·activation integer sum is exact;
//! each block then adds to a row's f32 accumulator in a fixed order, with no fused
//! multiply-add (so every ISA, wasm included, can reproduce it):
//! - Q4_0, Q5_0, Q8_0: `acc = acc + isum as f32 * (d * da)`, `isum = Σ (q - offset) · a`;
//! - Q4_1: ggml's own vec_dot arithmetic instead ([`super::Kind::keeps_ggml_bits`]);
//! - Q4_K, Q5_K: `isum = Σ_j sc_j Σ q·a`, `msum = Σ_j m_j Σ a`;
//!   `acc = acc + isum as f32 * (d * da)`, then `acc = acc - msum as f32 * (dmin * da)`;
//! - Q6_K: `isum = Σ_j sc_j Σ (q - 32)·a`; `acc = acc + isum as f32 * (d * da)`.
//!
//! Each output depends only on its weight row and activation row: the same bits one token at
//! a time or in any batch.

use crate::blocks::*;
use crate::vec_dot::blocks;
use tessera_gguf::GgmlType;

/// The integer values of a legacy block's 32 weights (offset removed).
fn legacy_ints(ty: GgmlType, w: &[u8], b: usize) -> ([i32; QK], f32) {
    let mut q = [0i32; QK];
    match ty {
        GgmlType::Q4_0 => {
            let blk = blocks::<BlockQ4_0>(w)[b];
            for i in 0..16 {
                q[i] = (blk.qs[i] & 15) as i32 - 8;
                q[i + 16] = (blk.qs[i] >> 4) as i32 - 8;
            }
            (q, blk.d.to_f32())
        }
        GgmlType::Q5_0 => {
            let blk = blocks::<BlockQ5_0>(w)[b];
            let qh = u32::from_le_bytes(blk.qh);
            for i in 0..16 {
                q[i] = ((blk.qs[i] & 15) as u32 | ((qh >> i) & 1) << 4) as i32 - 16;
                q[i + 16] = ((blk.qs[i] >> 4) as u32 | ((qh >> (i + 16)) & 1) << 4) as i32 - 16;
            }
            (q, blk.d.to_f32())
        }
        _ => {
            let blk = blocks::<BlockQ8_0>(w)[b];
            for (q, &v) in q.iter_mut().zip(&blk.qs) {
                *q = v as i32;
            }
            (q, blk.d.to_f32())
        }
    }
}

/// A legacy weight row (Q4_0, Q5_0, Q8_0) · a Q8_0 row.
fn legacy(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = 0.0f32;
    for b in 0..n / QK {
        let (q, d) = legacy_ints(ty, w, b);
        let blk = blocks::<BlockQ8_0>(a)[b];
        let isum: i32 = q.iter().zip(blk.qs).map(|(&q, a)| q * a as i32).sum();
        acc += isum as f32 * (d * blk.d.to_f32());
    }
    acc
}

/// One Q4_K/Q5_K super-block's unsigned weights, scales and mins.
fn k4_ints(ty: GgmlType, w: &[u8], b: usize) -> ([i32; QK_K], [u8; 12], f32, f32) {
    let mut q = [0i32; QK_K];
    let (qs, qh, scales, d, dmin) = if ty == GgmlType::Q4_K {
        let blk = blocks::<BlockQ4K>(w)[b];
        (blk.qs, None, blk.scales, blk.d, blk.dmin)
    } else {
        let blk = blocks::<BlockQ5K>(w)[b];
        (blk.qs, Some(blk.qh), blk.scales, blk.d, blk.dmin)
    };
    for c in 0..4 {
        for l in 0..32 {
            let (lo, hi) = (qs[32 * c + l] & 15, qs[32 * c + l] >> 4);
            let (blo, bhi) = qh.map_or((0, 0), |qh| {
                ((qh[l] >> (2 * c)) & 1, (qh[l] >> (2 * c + 1)) & 1)
            });
            q[64 * c + l] = (lo | blo << 4) as i32;
            q[64 * c + 32 + l] = (hi | bhi << 4) as i32;
        }
    }
    (q, scales, d.to_f32(), dmin.to_f32())
}

/// A Q4_K or Q5_K row · a Q8_K row.
fn k4(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let acts = blocks::<BlockQ8K>(a);
    let mut acc = 0.0f32;
    for (b, act) in acts.iter().enumerate().take(n / QK_K) {
        let (q, scales, d, dmin) = k4_ints(ty, w, b);
        let (mut isum, mut msum) = (0i32, 0i32);
        for j in 0..8 {
            let (sc, m) = k4_scale_min(&scales, j);
            let dot: i32 = (32 * j..32 * j + 32).map(|i| q[i] * act.qs[i] as i32).sum();
            isum += sc as i32 * dot;
            msum += m as i32 * (act.bsums[2 * j] as i32 + act.bsums[2 * j + 1] as i32);
        }
        acc += isum as f32 * (d * act.d);
        acc -= msum as f32 * (dmin * act.d);
    }
    acc
}

/// A Q6_K row · a Q8_K row.
fn q6_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let acts = blocks::<BlockQ8K>(a);
    let ws = blocks::<BlockQ6K>(w);
    let mut acc = 0.0f32;
    for (blk, act) in ws.iter().zip(acts.iter()).take(n / QK_K) {
        let mut q = [0i32; QK_K];
        for hf in 0..2 {
            let (ql, qh) = (&blk.ql[64 * hf..], &blk.qh[32 * hf..]);
            for l in 0..32 {
                let e = 128 * hf + l;
                q[e] = (ql[l] & 15 | (qh[l] & 3) << 4) as i32 - 32;
                q[e + 32] = (ql[l + 32] & 15 | ((qh[l] >> 2) & 3) << 4) as i32 - 32;
                q[e + 64] = (ql[l] >> 4 | ((qh[l] >> 4) & 3) << 4) as i32 - 32;
                q[e + 96] = (ql[l + 32] >> 4 | ((qh[l] >> 6) & 3) << 4) as i32 - 32;
            }
        }
        let mut isum = 0i32;
        for j in 0..16 {
            let dot: i32 = (16 * j..16 * j + 16).map(|i| q[i] * act.qs[i] as i32).sum();
            isum += blk.scales[j] as i32 * dot;
        }
        acc += isum as f32 * (blk.d.to_f32() * act.d);
    }
    acc
}

/// One weight row (ggml layout) · one activation row of [`crate::vec_dot_type`], with the
/// repacked kernels' arithmetic (ggml's for Q4_1). NaN for a type without a repacked layout.
pub fn dot(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 => legacy(ty, n, w, a),
        Q4_1 => crate::vec_dot::ggml_order::vec_dot_q4_1_q8_1(n, &blocks(w), &blocks(a)),
        Q4_K | Q5_K => k4(ty, n, w, a),
        Q6_K => q6_k(n, w, a),
        _ => f32::NAN,
    }
}
