//! MXFP4 × Q8_0 on AVX2.
//!
//! ggml's AVX2 kernel takes the blocks in pairs, even blocks into one register and odd blocks
//! into another, adds the two before the horizontal sum, and adds an odd last block in its
//! scalar tail loop (`sumf += d * sumi`, an FMA): `ggml_order::vec_dot_mxfp4_q8_0`. Its block
//! loop does not fit the prep/step macros of `avx2.rs` (the last block is treated differently),
//! so the three kernels are written out, around one accumulator type.

use super::*;

/// The 32 weights of an MXFP4 block as signed bytes: the doubled E2M1 values (`pshufb` on
/// ggml's `kvalues_mxfp4`), low nibbles in bytes 0..16, high nibbles in 16..32.
#[inline(always)]
unsafe fn prep_mxfp4(x: &BlockMxfp4) -> __m256i {
    let values = _mm_loadu_si128(KVALUES_MXFP4.as_ptr() as *const __m128i);
    let bits = _mm_loadu_si128(x.qs.as_ptr() as *const __m128i);
    let m4 = _mm_set1_epi8(0x0F);
    let lo = _mm_shuffle_epi8(values, _mm_and_si128(bits, m4));
    let hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16::<4>(bits), m4));
    _mm256_set_m128i(hi, lo)
}

/// One output's accumulators in ggml's MXFP4 kernel: even blocks, odd blocks, and the odd
/// last block (scale, integer sum), applied after the horizontal sum.
#[derive(Clone, Copy)]
struct MxAcc {
    even: __m256,
    odd: __m256,
    tail: Option<(f32, i32)>,
}

impl MxAcc {
    #[inline(always)]
    unsafe fn new() -> Self {
        MxAcc {
            even: _mm256_setzero_ps(),
            odd: _mm256_setzero_ps(),
            tail: None,
        }
    }

    /// Block `i` of `nb`: weights `w` (from [`prep_mxfp4`]) with exponent `e`, activations `y`.
    #[inline(always)]
    unsafe fn block(&mut self, i: usize, nb: usize, w: __m256i, e: u8, y: &BlockQ8_0) {
        let d = f16_to_f32(y.d) * e8m0_to_f32_half(e);
        let lanes = mul_sum_i8(w, load256(y.qs.as_ptr() as *const u8));
        if i % 2 == 1 {
            self.odd = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), self.odd);
        } else if i + 1 < nb {
            self.even = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), self.even);
        } else {
            let s = _mm_add_epi32(
                _mm256_castsi256_si128(lanes),
                _mm256_extracti128_si256::<1>(lanes),
            );
            let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
            self.tail = Some((d, _mm_cvtsi128_si32(s)));
        }
    }

    #[inline(always)]
    unsafe fn finish(self) -> f32 {
        let sumf = hsum_ps(_mm256_add_ps(self.even, self.odd));
        match self.tail {
            Some((d, sumi)) => d.mul_add(sumi as f32, sumf),
            None => sumf,
        }
    }
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_mxfp4_q8_0(n: usize, x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut acc = MxAcc::new();
    for i in 0..nb {
        acc.block(i, nb, prep_mxfp4(&x[i]), x[i].e, &y[i]);
    }
    acc.finish()
}

/// One weight row against four activation rows; each result is bit-identical to
/// [`vec_dot_mxfp4_q8_0`]'s.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_mxfp4_q8_0_x4(n: usize, x: &[BlockMxfp4], ys: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    let min_act = ys.iter().map(|y| y.len()).min().unwrap_or(0);
    let nb = block_count(n, QK, x.len(), min_act);
    let mut acc = [MxAcc::new(); 4];
    for i in 0..nb {
        let w = prep_mxfp4(&x[i]);
        for r in 0..4 {
            acc[r].block(i, nb, w, x[i].e, &ys[r][i]);
        }
    }
    acc.map(|a| a.finish())
}

/// Four weight rows against one activation row (decode); result r is bit-identical to
/// [`vec_dot_mxfp4_q8_0`] on `xs[r]`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_mxfp4_q8_0_r4(n: usize, xs: [&[BlockMxfp4]; 4], y: &[BlockQ8_0]) -> [f32; 4] {
    let min_w = xs.iter().map(|x| x.len()).min().unwrap_or(0);
    let nb = block_count(n, QK, min_w, y.len());
    let mut acc = [MxAcc::new(); 4];
    for i in 0..nb {
        for r in 0..4 {
            let x = &xs[r][i];
            acc[r].block(i, nb, prep_mxfp4(x), x.e, &y[i]);
        }
    }
    acc.map(|a| a.finish())
}
