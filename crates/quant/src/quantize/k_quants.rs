//! Reference quantizers of the K-quants, ggml's `quantize_row_*_ref` step for step: the
//! per-sub-block scale search, then the scales themselves quantized (to 4, 6 or 8 bits) against
//! a super-block scale stored as f16, then every element re-quantized with the scale as
//! stored, so the levels fit what a reader will reconstruct.

use super::rounding::nearest_int;
use super::scale_search::{make_q3_quants, make_qkx2_quants, make_qx_quants, AffineSearch};
use crate::blocks::{
    k4_scale_min, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K,
};
use half::f16;

/// Packs 2-bit levels: byte l of each 32-byte group holds elements l, l+32, l+64, l+96 of its
/// 128-element half.
fn pack_2bit(levels: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for (q, l) in qs.chunks_exact_mut(32).zip(levels.chunks_exact(128)) {
        for j in 0..32 {
            q[j] = l[j] | (l[j + 32] << 2) | (l[j + 64] << 4) | (l[j + 96] << 6);
        }
    }
}

/// ggml's `quantize_row_q2_K_ref`: 16 sub-blocks of 16, affine with 4-bit scales and mins.
pub fn quantize_row_q2_k(src: &[f32], dst: &mut [BlockQ2K]) {
    debug_assert_eq!(src.len(), dst.len() * QK_K);
    let search = AffineSearch {
        nmax: 3,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: true,
    };
    const Q4SCALE: f32 = 15.0;
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        let mut levels = [0u8; QK_K];
        let mut aux = [0u8; 16];
        let mut weights = [0f32; 16];
        let mut scales = [0f32; QK_K / 16];
        let mut mins = [0f32; QK_K / 16];
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            let lv = &mut levels[16 * j..16 * j + 16];
            (scales[j], mins[j]) = make_qkx2_quants(&search, xs, &weights, lv, &mut aux);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (q, &s) in y.scales.iter_mut().zip(&scales) {
                *q = nearest_int(iscale * s) as u8;
            }
            y.d = f16::from_f32(max_scale / Q4SCALE);
        } else {
            y.scales = [0; QK_K / 16];
            y.d = f16::from_f32(0.0);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (q, &m) in y.scales.iter_mut().zip(&mins) {
                *q |= (nearest_int(iscale * m) << 4) as u8;
            }
            y.dmin = f16::from_f32(max_min / Q4SCALE);
        } else {
            y.dmin = f16::from_f32(0.0);
        }
        for j in 0..QK_K / 16 {
            let d = y.d.to_f32() * (y.scales[j] & 0x0F) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = y.dmin.to_f32() * (y.scales[j] >> 4) as f32;
            for ii in 0..16 {
                levels[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
            }
        }
        pack_2bit(&levels, &mut y.qs);
    }
}

/// ggml's `quantize_row_q3_K_ref`: 16 sub-blocks of 16, symmetric 3-bit levels, 6-bit scales.
pub fn quantize_row_q3_k(src: &[f32], dst: &mut [BlockQ3K]) {
    debug_assert_eq!(src.len(), dst.len() * QK_K);
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        let mut levels = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut levels[16 * j..][..16]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        y.scales = [0; 12];
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &s) in scales.iter().enumerate() {
                // C stores nearest_int(...) into an int8_t before clamping.
                let l = ((nearest_int(iscale * s) as i8).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    y.scales[j] = l & 0x0F;
                } else {
                    y.scales[j - 8] |= (l & 0x0F) << 4;
                }
                y.scales[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
            }
            y.d = f16::from_f32(1.0 / iscale);
        } else {
            y.d = f16::from_f32(0.0);
        }
        let stored = crate::blocks::q3k_scales(&y.scales);
        for j in 0..QK_K / 16 {
            let d = y.d.to_f32() * stored[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
                levels[16 * j + ii] = (l + 4) as i8;
            }
        }
        // High bit of element j goes to bit j / 32 of hmask[j % 32].
        y.hmask = [0; QK_K / 8];
        let mut low = [0u8; QK_K];
        for (j, (&l, low)) in levels.iter().zip(low.iter_mut()).enumerate() {
            let mut l = l as u8;
            if l > 3 {
                y.hmask[j % 32] |= 1 << (j / 32);
                l -= 4;
            }
            *low = l;
        }
        pack_2bit(&low, &mut y.qs);
    }
}

/// Packs the 6-bit scales and mins of 8 sub-blocks into 12 bytes (inverse of [`k4_scale_min`]).
fn pack_k4_scales(ls: &[u8; 8], lm: &[u8; 8], scales: &mut [u8; 12]) {
    for j in 0..8 {
        if j < 4 {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4);
            scales[j - 4] |= (ls[j] >> 4) << 6;
            scales[j] |= (lm[j] >> 4) << 6;
        }
    }
}

/// The shared body of Q4_K and Q5_K: 8 sub-blocks of 32, affine levels in [0, nmax], scales
/// and mins quantized to 6 bits. Writes d, dmin, scales and returns the final levels.
fn quantize_k4_superblock(
    x: &[f32],
    search: &AffineSearch,
    d_out: &mut f16,
    dmin_out: &mut f16,
    packed: &mut [u8; 12],
) -> [u8; QK_K] {
    let mut levels = [0u8; QK_K];
    let mut aux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let lv = &mut levels[32 * j..32 * j + 32];
        (scales[j], mins[j]) = make_qkx2_quants(search, xs, &weights, lv, &mut aux);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
    for j in 0..8 {
        // C converts to uint8_t (wrapping) before MIN(63, ...).
        ls[j] = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        lm[j] = (nearest_int(inv_min * mins[j]) as u8).min(63);
    }
    pack_k4_scales(&ls, &lm, packed);
    *d_out = f16::from_f32(max_scale / 63.0);
    *dmin_out = f16::from_f32(max_min / 63.0);
    for j in 0..8 {
        let (sc, m) = k4_scale_min(packed, j);
        let d = d_out.to_f32() * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_out.to_f32() * m as f32;
        for ii in 0..32 {
            let l = nearest_int((x[32 * j + ii] + dm) / d).clamp(0, search.nmax);
            levels[32 * j + ii] = l as u8;
        }
    }
    levels
}

/// ggml's `quantize_row_q4_K_ref`.
pub fn quantize_row_q4_k(src: &[f32], dst: &mut [BlockQ4K]) {
    debug_assert_eq!(src.len(), dst.len() * QK_K);
    let search = AffineSearch {
        nmax: 15,
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        use_mad: false,
    };
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        y.scales = [0; 12];
        let levels = quantize_k4_superblock(x, &search, &mut y.d, &mut y.dmin, &mut y.scales);
        for (q, l) in y.qs.chunks_exact_mut(32).zip(levels.chunks_exact(64)) {
            for j in 0..32 {
                q[j] = l[j] | (l[j + 32] << 4);
            }
        }
    }
}

/// ggml's `quantize_row_q5_K_ref`.
pub fn quantize_row_q5_k(src: &[f32], dst: &mut [BlockQ5K]) {
    debug_assert_eq!(src.len(), dst.len() * QK_K);
    let search = AffineSearch {
        nmax: 31,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: false,
    };
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        y.scales = [0; 12];
        let levels = quantize_k4_superblock(x, &search, &mut y.d, &mut y.dmin, &mut y.scales);
        y.qh = [0; QK_K / 8];
        for (c, (q, l)) in
            y.qs.chunks_exact_mut(32)
                .zip(levels.chunks_exact(64))
                .enumerate()
        {
            let (m1, m2) = (1u8 << (2 * c), 2u8 << (2 * c));
            for j in 0..32 {
                let (mut l1, mut l2) = (l[j], l[j + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    y.qh[j] |= m1;
                }
                if l2 > 15 {
                    l2 -= 16;
                    y.qh[j] |= m2;
                }
                q[j] = l1 | (l2 << 4);
            }
        }
    }
}

/// ggml's `quantize_row_q6_K_ref`: 16 sub-blocks of 16, 6-bit levels, signed 8-bit scales.
pub fn quantize_row_q6_k(src: &[f32], dst: &mut [BlockQ6K]) {
    debug_assert_eq!(src.len(), dst.len() * QK_K);
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        let mut levels = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for ib in 0..QK_K / 16 {
            let lv = &mut levels[16 * ib..16 * ib + 16];
            scales[ib] = make_qx_quants(32, &x[16 * ib..16 * ib + 16], lv);
            if scales[ib].abs() > max_abs_scale {
                max_abs_scale = scales[ib].abs();
                max_scale = scales[ib];
            }
        }
        if max_abs_scale < 1e-15 {
            *y = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -128.0 / max_scale;
        y.d = f16::from_f32(1.0 / iscale);
        for (q, &s) in y.scales.iter_mut().zip(&scales) {
            *q = nearest_int(iscale * s).min(127) as i8;
        }
        for j in 0..QK_K / 16 {
            let d = y.d.to_f32() * y.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
                levels[16 * j + ii] = (l + 32) as i8;
            }
        }
        for (half, l) in levels.chunks_exact(128).enumerate() {
            let ql = &mut y.ql[64 * half..64 * half + 64];
            let qh = &mut y.qh[32 * half..32 * half + 32];
            for j in 0..32 {
                let q = [
                    l[j] as u8,
                    l[j + 32] as u8,
                    l[j + 64] as u8,
                    l[j + 96] as u8,
                ];
                ql[j] = (q[0] & 0x0F) | ((q[2] & 0x0F) << 4);
                ql[j + 32] = (q[1] & 0x0F) | ((q[3] & 0x0F) << 4);
                qh[j] = (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6);
            }
        }
    }
}

/// ggml's `quantize_row_q8_K_ref`: the activation format for K-quant weights. d = max / -127
/// of the largest-magnitude element (so q = -127 there), plus per-16 sums of the quants. On
/// x86-64 with AVX2 the blocks go through [`q8_k_avx2::block`] (the same bytes).
pub fn quantize_row_q8_k(src: &[f32], dst: &mut [BlockQ8K]) {
    debug_assert_eq!(src.len(), dst.len() * QK_K);
    #[cfg(target_arch = "x86_64")]
    let avx2 = crate::isa::level().has_avx2();
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU runs AVX2 (`isa::level` never exceeds what was detected).
        if avx2 && unsafe { q8_k_avx2::block(x, y) } {
            continue;
        }
        quantize_block_q8_k(x, y);
    }
}

/// One block of [`quantize_row_q8_k`], the definition.
fn quantize_block_q8_k(x: &[f32], y: &mut BlockQ8K) {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax == 0.0 {
        // ggml leaves bsums untouched here; zero is their only consistent value.
        *y = bytemuck::Zeroable::zeroed();
        return;
    }
    let iscale = -127.0 / max;
    for (q, &v) in y.qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (sum, q) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
        *sum = q.iter().map(|&q| q as i16).sum();
    }
    y.d = 1.0 / iscale;
}

/// [`quantize_block_q8_k`] in AVX2 for the blocks where that is plainly the same function:
/// finite elements, not all zero, and a finite `iscale`, so every `iscale · v` lies within
/// ±127.0001 and `cvtps2dq` (round half to even) equals `nearest_int`. Other blocks are
/// declined (`false`) and take the definition.
#[cfg(target_arch = "x86_64")]
mod q8_k_avx2 {
    use super::super::x86_lanes::{max_lane, store_i8, sum_lanes_i32};
    use super::{BlockQ8K, QK_K};
    use core::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2. `x` holds `QK_K` floats.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block(x: &[f32], y: &mut BlockQ8K) -> bool {
        let x = &x[..QK_K];
        let p = x.as_ptr();
        let (sign, inf) = (_mm256_set1_ps(-0.0), _mm256_set1_ps(f32::INFINITY));
        let mut amax = _mm256_setzero_ps();
        let mut bad = _mm256_setzero_ps();
        for i in (0..QK_K).step_by(8) {
            let a = _mm256_andnot_ps(sign, _mm256_loadu_ps(p.add(i)));
            // NaN or infinite: `!(a < inf)`.
            bad = _mm256_or_ps(bad, _mm256_cmp_ps::<_CMP_NLT_UQ>(a, inf));
            amax = _mm256_max_ps(amax, a);
        }
        if _mm256_movemask_ps(bad) != 0 {
            return false;
        }
        let amax = max_lane(amax);
        if amax == 0.0 {
            return false;
        }
        // The definition's `max`: the first element of the largest magnitude.
        let target = _mm256_set1_ps(amax);
        let mut max = 0.0;
        for i in (0..QK_K).step_by(8) {
            let a = _mm256_andnot_ps(sign, _mm256_loadu_ps(p.add(i)));
            let hits = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(a, target));
            if hits != 0 {
                max = x[i + hits.trailing_zeros() as usize];
                break;
            }
        }
        let iscale = -127.0 / max;
        if !iscale.is_finite() {
            return false;
        }
        let mul = _mm256_set1_ps(iscale);
        let top = _mm256_set1_epi32(127);
        let chunks: &mut [[i8; 32]] = bytemuck::cast_slice_mut(&mut y.qs);
        for (c, out) in chunks.iter_mut().enumerate() {
            // A loop, not `array::from_fn`: a closure's body is compiled without this
            // function's target features (its intrinsics became calls).
            let mut q = [_mm256_setzero_si256(); 4];
            for (v, qv) in q.iter_mut().enumerate() {
                let f = _mm256_mul_ps(mul, _mm256_loadu_ps(p.add(32 * c + 8 * v)));
                *qv = _mm256_min_epi32(_mm256_cvtps_epi32(f), top);
            }
            // Two sums of 16 quants (each in -127..=127: exact in i16).
            for h in 0..2 {
                let s = sum_lanes_i32(_mm256_add_epi32(q[2 * h], q[2 * h + 1]));
                y.bsums[2 * c + h] = s as i16;
            }
            store_i8(q, out);
        }
        y.d = 1.0 / iscale;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;

    fn bytes(b: &BlockQ8K) -> Vec<u8> {
        bytemuck::bytes_of(b).to_vec()
    }

    /// The dispatched quantizer (AVX2 where the CPU has it) gives the definition's bytes,
    /// on plain data, exact rounding ties, equal magnitudes of both signs, and degenerate
    /// blocks (zeros, NaN, infinities, subnormals, huge values).
    #[test]
    fn q8_k_gives_the_definitions_bytes() {
        let mut state = 7u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let mut blocks: Vec<Vec<f32>> = Vec::new();
        for scale in [1.0f32, 1e-3, 300.0] {
            blocks.push((0..QK_K).map(|_| uniform() * scale).collect());
        }
        // max = -127 → iscale = 1: every k + 0.5 is a tie.
        blocks.push(
            (0..QK_K)
                .map(|i| {
                    if i == 5 {
                        -127.0
                    } else {
                        (i % 200) as f32 - 99.5
                    }
                })
                .collect(),
        );
        // Equal magnitudes, the positive one first (the definition keeps the first).
        blocks.push((0..QK_K).map(|i| [3.0, -3.0, 1.25, -0.5][i % 4]).collect());
        blocks.push(vec![0.0; QK_K]);
        blocks.push(
            (0..QK_K)
                .map(|i| if i == 9 { f32::NAN } else { i as f32 })
                .collect(),
        );
        blocks.push(
            (0..QK_K)
                .map(|i| if i == 200 { f32::NEG_INFINITY } else { 1.0 })
                .collect(),
        );
        blocks.push(
            (0..QK_K)
                .map(|i| f32::from_bits(1 + i as u32 % 7))
                .collect(),
        );
        blocks.push(
            (0..QK_K)
                .map(|i| 3e38 * if i % 3 == 0 { -1.0 } else { 0.5 })
                .collect(),
        );
        for (n, x) in blocks.iter().enumerate() {
            let mut want = BlockQ8K::zeroed();
            quantize_block_q8_k(x, &mut want);
            let mut got = [BlockQ8K::zeroed()];
            quantize_row_q8_k(x, &mut got);
            assert_eq!(bytes(&got[0]), bytes(&want), "block {n}");
        }
    }
}
