//! AVX2 + FMA SwiGLU, bit-identical to the scalar `glu::swiglu` (same operations in the same
//! order as `glu::expf_ggml`; checked by the tests in `glu.rs`).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

pub fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

#[inline(always)]
unsafe fn c(bits: u32) -> __m256 {
    _mm256_set1_ps(f32::from_bits(bits))
}

/// 8 lanes of `glu::expf_ggml`.
#[inline(always)]
unsafe fn expf8(x: __m256) -> __m256 {
    let r = c(0x4b40_0000);
    let z = _mm256_fmadd_ps(x, c(0x3fb8_aa3b), r);
    let n = _mm256_sub_ps(z, r);
    let b = _mm256_fnmadd_ps(n, c(0x35bf_be8e), _mm256_fnmadd_ps(n, c(0x3f31_7200), x));
    let u = _mm256_mul_ps(b, b);
    let j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(c(0x3c07_2010), b, c(0x3d2b_9f17)),
            u,
            _mm256_fmadd_ps(c(0x3e2a_af33), b, c(0x3eff_fedb)),
        ),
        u,
        _mm256_fmadd_ps(c(0x3f7f_fff6), b, _mm256_set1_ps(1.0)),
    );
    // j * 2^half * 2^(n - half), as the scalar `scale_by_pow2`.
    let ni = _mm256_cvtps_epi32(n);
    let half = _mm256_srai_epi32::<1>(_mm256_add_epi32(ni, _mm256_srli_epi32::<31>(ni)));
    let rest = _mm256_sub_epi32(ni, half);
    let bias = _mm256_set1_epi32(127);
    let p1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(half, bias)));
    let p2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(rest, bias)));
    let res = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
    // |n| > 192: 0 below, +inf above (n <= 0 → 0).
    let big = _mm256_cmp_ps::<_CMP_GT_OQ>(
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), n),
        _mm256_set1_ps(192.0),
    );
    let alt = _mm256_blendv_ps(
        _mm256_set1_ps(f32::INFINITY),
        _mm256_setzero_ps(),
        _mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps()),
    );
    _mm256_blendv_ps(res, alt, big)
}

/// `out = silu(gate) * up` for the first `len / 8 * 8` elements; returns how many were done.
///
/// # Safety
/// The CPU must support AVX2 and FMA (see [`available`]).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) -> usize {
    let n = gate.len().min(up.len()).min(out.len()) / 8 * 8;
    for i in (0..n).step_by(8) {
        // SAFETY: i + 8 <= n <= every slice's length.
        let g = _mm256_loadu_ps(gate.as_ptr().add(i));
        let u = _mm256_loadu_ps(up.as_ptr().add(i));
        let e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        let s = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0), e));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_mul_ps(s, u));
    }
    n
}
