//! AVX2 + FMA + F16C versions of the attention inner loops, bit-identical to the scalar ones in
//! `attention.rs` (same operations in the same order; checked by the tests there).

#![cfg(target_arch = "x86_64")]

use half::f16;
use std::arch::x86_64::*;

/// Whether this CPU runs the kernels below (checked once, cached by std).
pub fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

#[inline(always)]
unsafe fn load_f16x8(p: *const f16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

/// Rounds 8 floats to f16 precision (round to nearest even) and back.
#[inline(always)]
unsafe fn round_f16(x: __m256) -> __m256 {
    _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x))
}

/// See `attention::dot_f16_steps`; `k.len()` must be a multiple of 64 here.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (see [`available`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16(k: &[f16], q: &[f16]) -> f32 {
    debug_assert!(k.len() % 64 == 0 && q.len() >= k.len());
    let mut acc = [_mm256_setzero_ps(); 8];
    let (kp, qp) = (k.as_ptr(), q.as_ptr());
    for i in (0..k.len()).step_by(64) {
        for (r, a) in acc.iter_mut().enumerate() {
            // SAFETY: i + 8r + 8 <= k.len() <= q.len().
            let kv = load_f16x8(kp.add(i + 8 * r));
            let qv = load_f16x8(qp.add(i + 8 * r));
            // The product of two f16 is exact in f32: fma == one f32 addition.
            *a = _mm256_fmadd_ps(kv, qv, *a);
        }
    }
    // 16-lane registers of the AVX-512 order: lanes 0..8 = regs 0,2,4,6; lanes 8..16 = 1,3,5,7.
    let x_lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6]));
    let x_hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7]));
    let t3 = _mm256_add_ps(x_hi, x_lo);
    let t6 = _mm_add_ps(_mm256_extractf128_ps::<1>(t3), _mm256_castps256_ps128(t3));
    let t8 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    let r = _mm_add_ss(t8, _mm_movehdup_ps(t8));
    _mm_cvtss_f32(r)
}

/// `attention::head_plus_leftovers(0.0, k, q)` — the sequential f64 sum of the exact f16
/// products — computed out of order when that is provably the same value; `None` otherwise
/// (then the caller runs the sequential loop). `k.len() % 8 == 0`.
///
/// Why any order gives the same bits: each product `a·b` of two f16 is `ma·mb·2^e` with
/// `ma·mb < 2^22`, so it is a multiple of a power of two greater than `|a·b| / 2^22`. All the
/// products, and so every partial sum in any order, are multiples of the smallest of those
/// powers, `G > pmin / 2^22` (`pmin`: the smallest non-zero `|a·b|`). A multiple of `G` whose
/// magnitude is under `2^53·G` is an f64, so when `Σ|a·b| < 2^31·pmin` every addition is exact
/// and the sum is the exact one whatever the order. The check uses `2^30` to leave room for
/// the rounding of the computed `Σ|a·b|`. Products of non-finite or huge values fail the check.
///
/// # Safety
/// As [`dot_f16`].
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16_exact_f64(k: &[f16], q: &[f16]) -> Option<f32> {
    debug_assert!(k.len() % 8 == 0 && q.len() >= k.len());
    let (kp, qp) = (k.as_ptr(), q.as_ptr());
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let inf = _mm256_set1_ps(f32::INFINITY);
    let (mut sum_lo, mut sum_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let (mut abs_lo, mut abs_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut pmin = inf;
    for i in (0..k.len()).step_by(8) {
        // SAFETY: i + 8 <= k.len() <= q.len().
        let p = _mm256_mul_ps(load_f16x8(kp.add(i)), load_f16x8(qp.add(i))); // exact
        let a = _mm256_and_ps(p, abs_mask);
        let zero = _mm256_cmp_ps::<_CMP_EQ_OQ>(a, _mm256_setzero_ps());
        pmin = _mm256_min_ps(pmin, _mm256_blendv_ps(a, inf, zero));
        sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(p)));
        abs_lo = _mm256_add_pd(abs_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
        abs_hi = _mm256_add_pd(abs_hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(a)));
    }
    let mut lanes = [0.0f64; 4];
    _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(abs_lo, abs_hi));
    let abs_sum: f64 = lanes.iter().sum();
    let mut mins = [0.0f32; 8];
    _mm256_storeu_ps(mins.as_mut_ptr(), pmin);
    let pmin = mins.iter().fold(f32::INFINITY, |m, &x| m.min(x)) as f64;
    if pmin == f64::INFINITY {
        return Some(0.0); // every product is zero
    }
    // `abs_sum < pmin * 2^30`, false for NaN and infinities.
    if !(abs_sum < pmin * (1u64 << 30) as f64) {
        return None;
    }
    _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(sum_lo, sum_hi));
    Some(((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) as f32)
}

/// `acc = f16(acc * ms)` on values that are already f16-exact; `acc.len() % 8 == 0`.
///
/// # Safety
/// As [`dot_f16`].
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn scale_f16(acc: &mut [f32], ms: f32) {
    let m = _mm256_set1_ps(ms);
    for c in acc.chunks_exact_mut(8) {
        let a = _mm256_loadu_ps(c.as_ptr());
        _mm256_storeu_ps(c.as_mut_ptr(), round_f16(_mm256_mul_ps(a, m)));
    }
}

/// `acc = f16(fma(v, vs, acc))`; `acc.len() % 8 == 0`, `v.len() >= acc.len()`.
///
/// # Safety
/// As [`dot_f16`].
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn mad_f16(acc: &mut [f32], v: &[f16], vs: f32) {
    debug_assert!(v.len() >= acc.len());
    let s = _mm256_set1_ps(vs);
    for (i, c) in acc.chunks_exact_mut(8).enumerate() {
        let a = _mm256_loadu_ps(c.as_ptr());
        // SAFETY: 8i + 8 <= acc.len() <= v.len().
        let x = load_f16x8(v.as_ptr().add(8 * i));
        _mm256_storeu_ps(c.as_mut_ptr(), round_f16(_mm256_fmadd_ps(x, s, a)));
    }
}
