//! Q8_0 / Q8_1 activation quantizers with the numbers of ggml's CPU backend on x86-64
//! (`quantize_row_q8_0` / `quantize_row_q8_1` in ggml-cpu's `arch/x86/quants.c`, AVX2 branch),
//! on every platform.
//!
//! They differ from the reference quantizers (`quantize_row_q8_*_ref`, see `legacy.rs`) in two
//! ways that move a quant by one step for a small fraction of values:
//! - the multiplier is `id = 127 / amax` (the reference uses `1 / (amax / 127)`);
//! - quants round half to even (`_mm256_round_ps` to nearest), not half away from zero.
//!
//! Everything else follows the SIMD code too, including what it does on degenerate input:
//! `amax` is reduced with `maxps`'s "second operand unless the first is greater" rule, in the
//! same lane order (so NaNs propagate as they do there), a float → i32 conversion out of range
//! or of NaN gives x86's "integer indefinite" `i32::MIN`, and the i32 → i8 narrowing saturates
//! (`packssdw` then `packsswb`). Q8_1's `s` is `d * (i32 sum of the unsaturated quants)`.
//!
//! llama.cpp quantizes every activation row a matmul consumes with these functions, so using the
//! same arithmetic is what lets Tessera's logits match llama.cpp's bit for bit (quantization
//! turns a last-bit difference into a whole step). The portable version is the definition; the
//! AVX2 version (x86-64, chosen at run time) and the SIMD128 one (wasm32) are tested to produce
//! identical bytes.

use crate::blocks::{BlockQ8_0, BlockQ8_1, QK};
use half::f16;

/// `maxps` / `maxss` on one lane: the first operand if it is greater, else the second (so a NaN
/// in either position yields the second operand).
#[inline(always)]
fn max_ps(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// The block's largest magnitude, reduced like ggml's AVX code: 4 vectors of 8 lanes folded
/// lane-wise, then the two 128-bit halves, then `movehl`, then `movehdup`.
#[inline(always)]
fn simd_amax(x: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    for (l, lane) in lanes.iter_mut().enumerate() {
        let mut m = x[l].abs();
        for v in 1..4 {
            m = max_ps(m, x[8 * v + l].abs());
        }
        *lane = m;
    }
    // _mm_max_ps(high half, low half)
    let m4: [f32; 4] = std::array::from_fn(|l| max_ps(lanes[4 + l], lanes[l]));
    // _mm_max_ps(m4, movehl(m4, m4)): lanes 0 and 1 meet lanes 2 and 3.
    let m2 = [max_ps(m4[0], m4[2]), max_ps(m4[1], m4[3])];
    // _mm_max_ss(m2, movehdup(m2))
    max_ps(m2[0], m2[1])
}

/// `cvtps2dq` of `roundps(x, nearest)`: round half to even, `i32::MIN` when out of range or NaN.
#[inline(always)]
fn round_even_to_i32(x: f32) -> i32 {
    if x.abs() < 4_194_304.0 {
        // Adding 1.5 * 2^23 leaves no fraction bits, so the hardware rounds (to nearest even)
        // to an integer; subtracting it again is exact.
        ((x + 12_582_912.0) - 12_582_912.0) as i32
    } else if x.abs() < 2_147_483_648.0 {
        x.round_ties_even() as i32
    } else {
        i32::MIN
    }
}

/// `packssdw` then `packsswb`: i32 → i8 with saturation.
#[inline(always)]
fn saturate_i8(v: i32) -> i8 {
    v.clamp(i8::MIN as i32, i8::MAX as i32) as i8
}

/// One block: writes the quants and returns `(d, i32 sum of the unsaturated quants)`.
#[inline(always)]
fn quantize_block(x: &[f32], qs: &mut [i8; QK]) -> (f32, i32) {
    let amax = simd_amax(x);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        let i = round_even_to_i32(v * id);
        sum = sum.wrapping_add(i);
        *q = saturate_i8(i);
    }
    (d, sum)
}

/// Portable ggml-x86 Q8_0 quantizer (the definition; see the module docs).
pub fn quantize_row_q8_0_portable(src: &[f32], dst: &mut [BlockQ8_0]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (d, _) = quantize_block(x, &mut y.qs);
        y.d = f16::from_f32(d);
    }
}

/// Portable ggml-x86 Q8_1 quantizer (the definition; see the module docs).
pub fn quantize_row_q8_1_portable(src: &[f32], dst: &mut [BlockQ8_1]) {
    debug_assert_eq!(src.len(), dst.len() * QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (d, sum) = quantize_block(x, &mut y.qs);
        y.d = f16::from_f32(d);
        y.s = f16::from_f32(d * sum as f32);
    }
}

/// Activation quantizer for Q4_0 / Q5_0 / Q8_0 weights: ggml's CPU (x86) `quantize_row_q8_0`,
/// identical bytes on every platform. For writing model files use `quantize_row_q8_0_ref`.
pub fn quantize_row_q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level().has_avx2() {
        // SAFETY: the CPU runs AVX2 (`isa::level` never exceeds what was detected).
        unsafe { avx2::quantize_row_q8_0(src, dst) };
        return;
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::quantize_row_q8_0(src, dst);
    #[allow(unreachable_code)]
    quantize_row_q8_0_portable(src, dst)
}

/// Activation quantizer for Q4_1 / Q5_1 weights: ggml's CPU (x86) `quantize_row_q8_1`,
/// identical bytes on every platform. For the reference quantizer use `quantize_row_q8_1_ref`.
pub fn quantize_row_q8_1(src: &[f32], dst: &mut [BlockQ8_1]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level().has_avx2() {
        // SAFETY: the CPU runs AVX2 (`isa::level` never exceeds what was detected).
        unsafe { avx2::quantize_row_q8_1(src, dst) };
        return;
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::quantize_row_q8_1(src, dst);
    #[allow(unreachable_code)]
    quantize_row_q8_1_portable(src, dst)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::x86_lanes::{max_lane, store_i8, sum_lanes_i32};
    use super::*;
    use core::arch::x86_64::*;

    /// One block: the i32 quants (4 × 8 lanes, element order) and d.
    #[inline(always)]
    unsafe fn block(x: &[f32]) -> ([__m256i; 4], f32) {
        debug_assert!(x.len() >= QK);
        let p = x.as_ptr();
        let v = [
            _mm256_loadu_ps(p),
            _mm256_loadu_ps(p.add(8)),
            _mm256_loadu_ps(p.add(16)),
            _mm256_loadu_ps(p.add(24)),
        ];
        let sign = _mm256_set1_ps(-0.0);
        let mut m = _mm256_andnot_ps(sign, v[0]);
        for &vi in &v[1..] {
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, vi));
        }
        let amax = max_lane(m);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let mul = _mm256_set1_ps(id);
        // A loop, not `v.map`: a closure's body is compiled without the caller's target
        // features, which left each intrinsic an out-of-line call.
        let mut q = [_mm256_setzero_si256(); 4];
        for (qi, &vi) in q.iter_mut().zip(&v) {
            let r = _mm256_round_ps::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(vi, mul));
            *qi = _mm256_cvtps_epi32(r);
        }
        (q, d)
    }

    #[inline(always)]
    unsafe fn hsum_i32(q: [__m256i; 4]) -> i32 {
        sum_lanes_i32(_mm256_add_epi32(
            _mm256_add_epi32(q[0], q[1]),
            _mm256_add_epi32(q[2], q[3]),
        ))
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_row_q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
        debug_assert_eq!(src.len(), dst.len() * QK);
        for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
            let (q, d) = block(x);
            y.d = f16::from_f32(d);
            store_i8(q, &mut y.qs);
        }
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_row_q8_1(src: &[f32], dst: &mut [BlockQ8_1]) {
        debug_assert_eq!(src.len(), dst.len() * QK);
        for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
            let (q, d) = block(x);
            y.d = f16::from_f32(d);
            y.s = f16::from_f32(d * hsum_i32(q) as f32);
            store_i8(q, &mut y.qs);
        }
    }
}

/// The wasm SIMD128 build: the portable definition in 4-lane vectors. `maxps(a, b)` is
/// `pmax(b, a)`; finite products round to even (`nearest`) and convert exactly; the narrowing
/// saturates as `packssdw`/`packsswb` do. A block with a NaN, or an infinite `amax` or `id`,
/// where x86's "integer indefinite" conversion comes in (wasm's saturates instead), goes to the
/// portable code.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128 {
    use super::*;
    use core::arch::wasm32::*;

    /// One block's i32 quants (element order) and d; `None` for the degenerate blocks.
    #[inline(always)]
    fn block(x: &[f32]) -> Option<([v128; 8], f32)> {
        let x = &x[..QK];
        // SAFETY: `x` holds 32 floats; wasm loads have no alignment requirement.
        let v: [v128; 8] =
            std::array::from_fn(|i| unsafe { v128_load(x[4 * i..].as_ptr() as *const v128) });
        let nan = v
            .iter()
            .fold(f32x4_splat(0.0), |m, &vi| v128_or(m, f32x4_ne(vi, vi)));
        // ggml's 8 lanes: lanes 0-3 in `lo` (vectors 0, 2, 4, 6), 4-7 in `hi`.
        let (mut lo, mut hi) = (f32x4_abs(v[0]), f32x4_abs(v[1]));
        for k in 1..4 {
            lo = f32x4_pmax(f32x4_abs(v[2 * k]), lo);
            hi = f32x4_pmax(f32x4_abs(v[2 * k + 1]), hi);
        }
        let m4 = f32x4_pmax(lo, hi);
        let m2 = f32x4_pmax(m4, i32x4_shuffle::<2, 3, 2, 3>(m4, m4));
        let amax = f32x4_extract_lane::<0>(f32x4_pmax(i32x4_shuffle::<1, 1, 1, 1>(m2, m2), m2));
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        // (A subnormal amax overflows `id`.)
        if v128_any_true(nan) || !amax.is_finite() || !id.is_finite() {
            return None;
        }
        let d = amax / 127.0;
        let id = f32x4_splat(id);
        Some((
            v.map(|vi| i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(vi, id)))),
            d,
        ))
    }

    #[inline(always)]
    fn store_i8(q: &[v128; 8], qs: &mut [i8; QK]) {
        for (h, out) in qs.chunks_exact_mut(16).enumerate() {
            let a = i16x8_narrow_i32x4(q[4 * h], q[4 * h + 1]);
            let b = i16x8_narrow_i32x4(q[4 * h + 2], q[4 * h + 3]);
            // SAFETY: `out` holds 16 bytes.
            unsafe { v128_store(out.as_mut_ptr() as *mut v128, i8x16_narrow_i16x8(a, b)) };
        }
    }

    fn sum_i32(q: &[v128; 8]) -> i32 {
        let s = q.iter().fold(i32x4_splat(0), |s, &v| i32x4_add(s, v));
        let s = i32x4_add(s, i32x4_shuffle::<2, 3, 0, 1>(s, s));
        i32x4_extract_lane::<0>(i32x4_add(s, i32x4_shuffle::<1, 0, 3, 2>(s, s)))
    }

    pub(super) fn quantize_row_q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
        debug_assert_eq!(src.len(), dst.len() * QK);
        for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
            match block(x) {
                Some((q, d)) => {
                    y.d = f16::from_f32(d);
                    store_i8(&q, &mut y.qs);
                }
                None => quantize_row_q8_0_portable(x, std::slice::from_mut(y)),
            }
        }
    }

    pub(super) fn quantize_row_q8_1(src: &[f32], dst: &mut [BlockQ8_1]) {
        debug_assert_eq!(src.len(), dst.len() * QK);
        for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
            match block(x) {
                Some((q, d)) => {
                    y.d = f16::from_f32(d);
                    y.s = f16::from_f32(d * sum_i32(&q) as f32);
                    store_i8(&q, &mut y.qs);
                }
                None => quantize_row_q8_1_portable(x, std::slice::from_mut(y)),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use wasm_bindgen_test::wasm_bindgen_test as test;

        /// Random rows at many scales and the degenerate ones (NaN, infinities, subnormals,
        /// ties), byte for byte against the portable definition.
        #[test]
        fn equals_portable() {
            let mut seed = 1u64;
            let mut rand = || {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let mut rows: Vec<Vec<f32>> = Vec::new();
            for scale in [1e-40f32, 1e-30, 1e-6, 1.0, 37.0, 1e30, f32::MAX] {
                for _ in 0..20 {
                    rows.push((0..256).map(|_| rand() * scale).collect());
                }
            }
            let special = [
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                1e-45,
                -0.0,
                127.0,
            ];
            for (i, &s) in special.iter().enumerate() {
                let mut r: Vec<f32> = (0..64).map(|j| j as f32 - 31.5).collect();
                r[i * 7] = s;
                rows.push(r);
            }
            rows.push(vec![0.0; 64]);
            for x in rows {
                same_bytes::<BlockQ8_1>(&x, quantize_row_q8_1, quantize_row_q8_1_portable);
                same_bytes::<BlockQ8_0>(&x, quantize_row_q8_0, quantize_row_q8_0_portable);
            }
        }

        /// `simd` and `portable` quantize `x` to the same bytes.
        fn same_bytes<B: bytemuck::Pod>(
            x: &[f32],
            simd: fn(&[f32], &mut [B]),
            portable: fn(&[f32], &mut [B]),
        ) {
            let nb = x.len() / QK;
            let (mut a, mut b) = (vec![B::zeroed(); nb], vec![B::zeroed(); nb]);
            simd(x, &mut a);
            portable(x, &mut b);
            assert_eq!(
                bytemuck::cast_slice::<_, u8>(&a),
                bytemuck::cast_slice::<_, u8>(&b),
                "{x:?}"
            );
        }
    }
}
