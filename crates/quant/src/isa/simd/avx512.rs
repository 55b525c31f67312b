//! [`Simd`] on 16 lanes of AVX-512 (F, BW, DQ, VL; F16C conversions).

use super::Simd;
use crate::isa::{detected, Level};
use core::arch::x86_64::*;
use half::f16;

/// Proof that the CPU runs AVX-512 F, BW, DQ and VL (and so AVX2, FMA and F16C).
#[derive(Clone, Copy, Debug)]
pub struct Avx512(());

impl Avx512 {
    /// The token, if this CPU runs AVX-512 F, BW, DQ and VL.
    pub fn new() -> Option<Avx512> {
        detected().supports(Level::Avx512).then_some(Avx512(()))
    }
}

// SAFETY (every `unsafe` below): an `Avx512` exists only where the CPU runs AVX-512 F, BW, DQ
// and VL; loads and stores are bounds-checked by the slicing in front of them.
impl Simd for Avx512 {
    const LANES: usize = 16;
    const LEVEL: Level = Level::Avx512;
    type F32 = __m512;
    type Mask = __mmask16;
    type X32 = [__m512; 2];
    type WideSum = (__m512d, __m512d);

    #[inline(always)]
    fn splat(self, x: f32) -> __m512 {
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> __m512 {
        unsafe { _mm512_loadu_ps(src[..16].as_ptr()) }
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32], v: __m512) {
        unsafe { _mm512_storeu_ps(dst[..16].as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn load_f16(self, src: &[f16]) -> __m512 {
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(src[..16].as_ptr() as *const __m256i)) }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_div_ps(a, b) }
    }
    #[inline(always)]
    fn neg(self, a: __m512) -> __m512 {
        unsafe { _mm512_xor_ps(a, _mm512_set1_ps(-0.0)) }
    }
    #[inline(always)]
    fn abs(self, a: __m512) -> __m512 {
        unsafe { _mm512_abs_ps(a) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn neg_mul_add(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn gt(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_LE_OQ>(a, b) }
    }
    #[inline(always)]
    fn select(self, mask: __mmask16, if_true: __m512, if_false: __m512) -> __m512 {
        unsafe { _mm512_mask_blend_ps(mask, if_false, if_true) }
    }
    #[inline(always)]
    fn scale_by_pow2(self, j: __m512, n: __m512) -> __m512 {
        unsafe {
            let ni = _mm512_cvtps_epi32(n);
            // `n / 2` truncates towards zero: add the sign bit before the arithmetic shift.
            let half = _mm512_srai_epi32::<1>(_mm512_add_epi32(ni, _mm512_srli_epi32::<31>(ni)));
            let bias = _mm512_set1_epi32(127);
            let p1 = _mm512_slli_epi32::<23>(_mm512_add_epi32(half, bias));
            let p2 = _mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_sub_epi32(ni, half), bias));
            _mm512_mul_ps(
                _mm512_mul_ps(j, _mm512_castsi512_ps(p1)),
                _mm512_castsi512_ps(p2),
            )
        }
    }
    #[inline(always)]
    fn round_f16(self, x: __m512) -> __m512 {
        unsafe { _mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x)) }
    }
    #[inline(always)]
    fn or_mask(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        a | b
    }
    #[inline(always)]
    fn any(self, mask: __mmask16) -> bool {
        mask != 0
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_min_ps(a, b) }
    }
    #[inline(always)]
    fn lane_min(self, x: __m512) -> f32 {
        unsafe { _mm512_reduce_min_ps(x) }
    }
    #[inline(always)]
    fn lane_sum(self, x: __m512) -> f32 {
        unsafe { _mm512_reduce_add_ps(x) }
    }
    #[inline(always)]
    fn low12_mantissa_zero(self, x: __m512) -> __mmask16 {
        unsafe { _mm512_testn_epi32_mask(_mm512_castps_si512(x), _mm512_set1_epi32(0xfff)) }
    }
    #[inline(always)]
    fn round_to_odd(self, s: __m512, e: __m512) -> __m512 {
        unsafe {
            let si = _mm512_castps_si512(s);
            let one = _mm512_set1_epi32(1);
            let inexact = _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(e, _mm512_setzero_ps());
            let even = _mm512_testn_epi32_mask(si, one);
            let abs = _mm512_and_si512(si, _mm512_set1_epi32(0x7fff_ffff));
            let finite = _mm512_cmplt_epi32_mask(abs, _mm512_set1_epi32(0x7f80_0000));
            // +1 (away from zero) where e has the sign of s, else -1.
            let step = _mm512_or_si512(
                _mm512_srai_epi32::<31>(_mm512_xor_si512(si, _mm512_castps_si512(e))),
                one,
            );
            let odd = _mm512_mask_add_epi32(si, inexact & even & finite, si, step);
            _mm512_castsi512_ps(odd)
        }
    }
    #[inline(always)]
    fn sum_halves_f16(self, x: __m512) -> f32 {
        unsafe {
            let lo = _mm512_castps512_ps256(x);
            let hi = _mm512_extractf32x8_ps::<1>(x);
            let x = _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_add_ps(
                lo, hi,
            )));
            super::avx2::sum_halves_f16_x4(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x))
        }
    }
    #[inline(always)]
    fn x32_splat(self, x: f32) -> [__m512; 2] {
        [self.splat(x); 2]
    }
    #[inline(always)]
    fn wide_zero(self) -> (__m512d, __m512d) {
        unsafe { (_mm512_setzero_pd(), _mm512_setzero_pd()) }
    }
    #[inline(always)]
    fn wide_add(self, acc: (__m512d, __m512d), x: __m512) -> (__m512d, __m512d) {
        unsafe {
            (
                _mm512_add_pd(acc.0, _mm512_cvtps_pd(_mm512_castps512_ps256(x))),
                _mm512_add_pd(acc.1, _mm512_cvtps_pd(_mm512_extractf32x8_ps::<1>(x))),
            )
        }
    }
    #[inline(always)]
    fn wide_total(self, acc: (__m512d, __m512d)) -> f64 {
        unsafe { _mm512_reduce_add_pd(_mm512_add_pd(acc.0, acc.1)) }
    }
}
