//! [`Simd`] on 8 lanes of AVX2 with FMA and F16C.

use super::Simd;
use crate::isa::{detected, Level};
use core::arch::x86_64::*;
use half::f16;

/// Proof that the CPU runs AVX2, FMA and F16C.
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

impl Avx2 {
    /// The token, if this CPU runs AVX2, FMA and F16C.
    pub fn new() -> Option<Avx2> {
        detected().supports(Level::Avx2).then_some(Avx2(()))
    }
}

// SAFETY (every `unsafe` below): an `Avx2` exists only where the CPU runs AVX2, FMA and F16C;
// loads and stores are bounds-checked by the slicing in front of them.
impl Simd for Avx2 {
    const LANES: usize = 8;
    const LEVEL: Level = Level::Avx2;
    type F32 = __m256;
    type Mask = __m256;
    type X32 = [__m256; 4];
    type WideSum = (__m256d, __m256d);

    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> __m256 {
        unsafe { _mm256_loadu_ps(src[..8].as_ptr()) }
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32], v: __m256) {
        unsafe { _mm256_storeu_ps(dst[..8].as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn load_f16(self, src: &[f16]) -> __m256 {
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(src[..8].as_ptr() as *const __m128i)) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    fn neg(self, a: __m256) -> __m256 {
        unsafe { _mm256_xor_ps(a, _mm256_set1_ps(-0.0)) }
    }
    #[inline(always)]
    fn abs(self, a: __m256) -> __m256 {
        unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), a) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn neg_mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn gt(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_GT_OQ>(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_LE_OQ>(a, b) }
    }
    #[inline(always)]
    fn select(self, mask: __m256, if_true: __m256, if_false: __m256) -> __m256 {
        unsafe { _mm256_blendv_ps(if_false, if_true, mask) }
    }
    #[inline(always)]
    fn scale_by_pow2(self, j: __m256, n: __m256) -> __m256 {
        unsafe {
            let ni = _mm256_cvtps_epi32(n);
            // `n / 2` truncates towards zero: add the sign bit before the arithmetic shift.
            let half = _mm256_srai_epi32::<1>(_mm256_add_epi32(ni, _mm256_srli_epi32::<31>(ni)));
            let bias = _mm256_set1_epi32(127);
            let p1 = _mm256_slli_epi32::<23>(_mm256_add_epi32(half, bias));
            let p2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_sub_epi32(ni, half), bias));
            _mm256_mul_ps(
                _mm256_mul_ps(j, _mm256_castsi256_ps(p1)),
                _mm256_castsi256_ps(p2),
            )
        }
    }
    #[inline(always)]
    fn round_f16(self, x: __m256) -> __m256 {
        unsafe { _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x)) }
    }
    #[inline(always)]
    fn or_mask(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_or_ps(a, b) }
    }
    #[inline(always)]
    fn any(self, mask: __m256) -> bool {
        unsafe { _mm256_movemask_ps(mask) != 0 }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    fn lane_min(self, x: __m256) -> f32 {
        unsafe {
            let m = _mm_min_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x));
            let m = _mm_min_ps(m, _mm_movehl_ps(m, m));
            _mm_cvtss_f32(_mm_min_ss(m, _mm_movehdup_ps(m)))
        }
    }
    #[inline(always)]
    fn lane_sum(self, x: __m256) -> f32 {
        unsafe {
            let m = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x));
            let m = _mm_add_ps(m, _mm_movehl_ps(m, m));
            _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)))
        }
    }
    #[inline(always)]
    fn low12_mantissa_zero(self, x: __m256) -> __m256 {
        unsafe {
            let low = _mm256_slli_epi32::<20>(_mm256_castps_si256(x));
            _mm256_castsi256_ps(_mm256_cmpeq_epi32(low, _mm256_setzero_si256()))
        }
    }
    #[inline(always)]
    fn round_to_odd(self, s: __m256, e: __m256) -> __m256 {
        unsafe {
            let si = _mm256_castps_si256(s);
            let one = _mm256_set1_epi32(1);
            let inexact = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_NEQ_UQ>(e, _mm256_setzero_ps()));
            let even = _mm256_cmpeq_epi32(_mm256_and_si256(si, one), _mm256_setzero_si256());
            let abs = _mm256_and_si256(si, _mm256_set1_epi32(0x7fff_ffff));
            let finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7f80_0000), abs);
            let mask = _mm256_and_si256(inexact, _mm256_and_si256(even, finite));
            // +1 (away from zero) where e has the sign of s, else -1.
            let step = _mm256_or_si256(
                _mm256_srai_epi32::<31>(_mm256_xor_si256(si, _mm256_castps_si256(e))),
                one,
            );
            _mm256_castsi256_ps(_mm256_add_epi32(si, _mm256_and_si256(step, mask)))
        }
    }
    #[inline(always)]
    fn sum_halves_f16(self, x: __m256) -> f32 {
        unsafe { sum_halves_f16_x4(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x)) }
    }
    #[inline(always)]
    fn x32_splat(self, x: f32) -> [__m256; 4] {
        [self.splat(x); 4]
    }
    #[inline(always)]
    fn wide_zero(self) -> (__m256d, __m256d) {
        unsafe { (_mm256_setzero_pd(), _mm256_setzero_pd()) }
    }
    #[inline(always)]
    fn wide_add(self, acc: (__m256d, __m256d), x: __m256) -> (__m256d, __m256d) {
        unsafe {
            (
                _mm256_add_pd(acc.0, _mm256_cvtps_pd(_mm256_castps256_ps128(x))),
                _mm256_add_pd(acc.1, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x))),
            )
        }
    }
    #[inline(always)]
    fn wide_total(self, acc: (__m256d, __m256d)) -> f64 {
        unsafe {
            let t = _mm256_add_pd(acc.0, acc.1);
            let t = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd::<1>(t));
            _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)))
        }
    }
}

/// `lo + hi` in f16 arithmetic, then halvings of the 4 lanes: [`Simd::sum_halves_f16`] of the 8
/// lanes `lo, hi` (AVX-512's 16 lanes end the same way).
///
/// # Safety
/// The CPU runs AVX2 and F16C, and both are enabled where this inlines.
#[inline(always)]
pub(super) unsafe fn sum_halves_f16_x4(lo: __m128, hi: __m128) -> f32 {
    let x = round_f16_x4(_mm_add_ps(lo, hi));
    let x = round_f16_x4(_mm_add_ps(x, _mm_movehl_ps(x, x)));
    let x = round_f16_x4(_mm_add_ss(x, _mm_movehdup_ps(x)));
    _mm_cvtss_f32(x)
}

/// [`Simd::round_f16`] on 4 lanes.
///
/// # Safety
/// As [`sum_halves_f16_x4`].
#[inline(always)]
unsafe fn round_f16_x4(x: __m128) -> __m128 {
    _mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x))
}
