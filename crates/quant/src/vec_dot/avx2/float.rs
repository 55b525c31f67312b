//! Float rows (f16 · f16, f32 · f32) on AVX2: four 8-lane FMA chains, then a scalar tail.

use super::*;

#[inline(always)]
unsafe fn load_f16x8(p: *const __m128i) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p))
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_f16_f16(n: usize, x: &[f16], y: &[f16]) -> f32 {
    let n = block_count(n, 1, x.len(), y.len());
    let (xp, yp) = (x.as_ptr() as *const __m128i, y.as_ptr() as *const __m128i);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let v = i / 8 + k;
            *a = _mm256_fmadd_ps(load_f16x8(xp.add(v)), load_f16x8(yp.add(v)), *a);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(load_f16x8(xp.add(i / 8)), load_f16x8(yp.add(i / 8)), acc[0]);
        i += 8;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut s = hsum_ps(sum);
    for j in i..n {
        s += f16_to_f32(x[j]) * f16_to_f32(y[j]);
    }
    s
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_f32_f32(n: usize, x: &[f32], y: &[f32]) -> f32 {
    let n = block_count(n, 1, x.len(), y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let j = i + 8 * k;
            *a = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(j)), _mm256_loadu_ps(yp.add(j)), *a);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(
            _mm256_loadu_ps(xp.add(i)),
            _mm256_loadu_ps(yp.add(i)),
            acc[0],
        );
        i += 8;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut s = hsum_ps(sum);
    for j in i..n {
        s += x[j] * y[j];
    }
    s
}
