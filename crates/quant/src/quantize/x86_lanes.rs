//! AVX2 lane work the x86 activation quantizers share (`activation.rs`, `k_quants.rs`).
//! Callers enable AVX2 on their own functions; these inline into them.

use core::arch::x86_64::*;

/// The largest lane of `m` by `maxps` / `maxss`, folding the high half onto the low one, then
/// pairs (ggml's order, so a NaN propagates as it does there).
#[inline(always)]
pub(super) unsafe fn max_lane(m: __m256) -> f32 {
    let m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(m), _mm256_castps256_ps128(m));
    let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)))
}

/// The sum of the 8 i32 lanes of `s`.
#[inline(always)]
pub(super) unsafe fn sum_lanes_i32(s: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// Saturating i32 → i8 of 32 quants (4 × 8 lanes, element order), stored in order at `qs`.
#[inline(always)]
pub(super) unsafe fn store_i8(q: [__m256i; 4], qs: &mut [i8; 32]) {
    // packs work per 128-bit half; the permute restores element order.
    let a = _mm256_packs_epi32(q[0], q[1]);
    let b = _mm256_packs_epi32(q[2], q[3]);
    let bytes = _mm256_packs_epi16(a, b);
    let ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(qs.as_mut_ptr() as *mut __m256i, ordered);
}
