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
}
