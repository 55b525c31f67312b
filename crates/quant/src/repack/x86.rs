//! x86-64 builds of the repacked kernels ([`super::tiles`]): AVX2 (`maddubs` + `madd`),
//! AVX-VNNI and AVX-512 VNNI (`vpdpbusd` on 256-bit registers). Only the integer dot product
//! differs between them (AVX2 also keeps i16 sums over the short runs that one scale multiplies:
//! `dot_sub`), and integer sums are exact, so all three give the reference's bits
//! ([`super::reference`]). Q4_1 has kernels of its own ([`super::x86_q4_1`]: ggml's arithmetic).
//!
//! A tile is one group (8 weight rows, one f32 lane each) × `T` activation rows. Integer sums
//! of a 32-byte register of quant bytes (4 rows × 8 bytes) against a broadcast of 8 activation
//! bytes come out as two lanes per row; [`per_row`] folds two such registers into one lane per
//! row, rows in order.

macro_rules! repack_kernels {
    ($features:literal, i16_sums: $i16_sums:literal, |$acc:ident, $u:ident, $s:ident| $dot:expr) => {
        use crate::blocks::*;
        use crate::repack::layout::*;
        use std::arch::x86_64::*;

        /// Unsigned × signed bytes, summed in groups of 4 into the 8 i32 lanes of `acc`.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn dot($acc: __m256i, $u: __m256i, $s: __m256i) -> __m256i {
            $dot
        }

        type B = __m256i;
        type I = __m256i;
        type R = __m256i;
        type F = __m256;

        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn load(p: *const u8) -> __m256i {
            _mm256_loadu_si256(p as *const __m256i)
        }

        /// Asks for the cache line at `p` (any address: a prefetch never faults).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn prefetch(p: *const u8) {
            _mm_prefetch::<_MM_HINT_T0>(p as *const i8)
        }

        /// 8 activation bytes, repeated for 4 rows.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn bcast8(p: *const i8) -> __m256i {
            _mm256_set1_epi64x((p as *const i64).read_unaligned())
        }

        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn f16x8<const N: usize>(p: *const half::f16) -> __m256 {
            _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
        }

        #[inline]
        fn f16_to_f32(h: half::f16) -> f32 {
            h.to_f32()
        }

        /// 8 bytes widened to 8 lanes (signed or unsigned per `signed`).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn widen8(p: *const u8, signed: bool) -> __m256i {
            let x = _mm_loadl_epi64(p as *const __m128i);
            if signed {
                _mm256_cvtepi8_epi32(x)
            } else {
                _mm256_cvtepu8_epi32(x)
            }
        }

        /// Lane pairs of rows 0-3 (`a`) and rows 4-7 (`b`) → one lane per row, in order.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn per_row(a: __m256i, b: __m256i) -> __m256i {
            let h = _mm256_hadd_epi32(a, b); // rows 0 1 4 5 2 3 6 7
            _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7))
        }

        /// `acc + isum * scale`, unfused like the reference.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn add_scaled(acc: __m256, isum: __m256i, scale: __m256) -> __m256 {
            _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale))
        }

        /// Nibbles: `part` 0 the low ones, 1 the high ones.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn nibbles(q: __m256i, part: usize) -> __m256i {
            let m4 = _mm256_set1_epi8(15);
            if part == 0 {
                _mm256_and_si256(q, m4)
            } else {
                _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)
            }
        }

        /// A spread 5th bit (see `layout::spread_q5_0`) at bit 4: register `k`'s low-nibble
        /// element (`part` 0, bit 2(k%4)) or high-nibble element (`part` 1, the bit above).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn fifth_bit(hb: __m256i, k: usize, part: usize) -> __m256i {
            let bit = 2 * (k % 4) + part;
            _mm256_and_si256(shift_to(hb, bit, 4), _mm256_set1_epi8(0x10))
        }

        /// Moves bit `from` of each byte to bit `to` (other bits move along; callers mask).
        /// The count is a register operand, so a loop the compiler leaves rolled still shifts
        /// in one instruction.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn shift_to(x: __m256i, from: usize, to: usize) -> __m256i {
            if from <= to {
                _mm256_sll_epi16(x, _mm_cvtsi32_si128((to - from) as i32))
            } else {
                _mm256_srl_epi16(x, _mm_cvtsi32_si128((from - to) as i32))
            }
        }

        /// Q6_K's two high bits at `shift` (0, 2, 4, 6) moved to bits 4-5.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q6_high(qh: __m256i, shift: usize) -> __m256i {
            _mm256_and_si256(shift_to(qh, shift, 4), _mm256_set1_epi8(0x30))
        }

        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn zero_i() -> I {
            _mm256_setzero_si256()
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn zero_r() -> R {
            _mm256_setzero_si256()
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn zero_f() -> F {
            _mm256_setzero_ps()
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn add_r(a: R, b: R) -> R {
            _mm256_add_epi32(a, b)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn sub_r(a: R, b: R) -> R {
            _mm256_sub_epi32(a, b)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn splat_r(x: i32) -> R {
            _mm256_set1_epi32(x)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn sub_f(a: F, b: F) -> F {
            _mm256_sub_ps(a, b)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn mul_f(a: F, b: F) -> F {
            _mm256_mul_ps(a, b)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn splat_f(x: f32) -> F {
            _mm256_set1_ps(x)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn to_f(x: R) -> F {
            _mm256_cvtepi32_ps(x)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn store_f(p: *mut f32, x: F) {
            _mm256_storeu_ps(p, x)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn or_b(a: B, b: B) -> B {
            _mm256_or_si256(a, b)
        }
        /// Q8_0's signed weights `w` against activations `a` as `dot` takes them: |w| and a
        /// with w's signs.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q8_operands<const N: usize>(w: B, a: B) -> (B, B) {
            (_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w))
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn dot_q8<const N: usize, const FUSED_DOT: bool>(acc: I, u: B, s: B) -> I {
            dot(acc, u, s)
        }
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q8_sums<const N: usize, const FUSED_DOT: bool>(a: I) -> I {
            a
        }

        /// Σ_j m_j Σa per row (`tiles`' `k4_msum`), two sub-blocks per `madd`: row r's
        /// i32 lane pairs the mins (m_j, m_j+1) with the activation sums (Σa_j, Σa_j+1) as i16
        /// (mins under 64, sums of 32 activations under 4064 in magnitude).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn k4_msum(mins: &[u8; 64], bsums: &[i16; 16]) -> R {
            // Σa of sub-block j = bsums[2j] + bsums[2j+1]: i16 lane j of `bs`.
            let b = _mm256_loadu_si256(bsums.as_ptr() as *const __m256i);
            let bs = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
            let pairs = [
                _mm256_broadcastd_epi32(bs),
                _mm256_broadcastd_epi32(_mm_shuffle_epi32::<0x55>(bs)),
                _mm256_broadcastd_epi32(_mm_shuffle_epi32::<0xaa>(bs)),
                _mm256_broadcastd_epi32(_mm_shuffle_epi32::<0xff>(bs)),
            ];
            let mut m = _mm256_setzero_si256();
            for (jp, pair) in pairs.into_iter().enumerate() {
                // Sub-blocks 2jp and 2jp+1: row r's two mins side by side.
                let x = _mm_loadu_si128(mins.as_ptr().add(16 * jp) as *const __m128i);
                let w = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x, _mm_srli_si128::<8>(x)));
                m = _mm256_add_epi32(m, _mm256_madd_epi16(w, pair));
            }
            m
        }

        /// Whether [`dot_sub`] keeps `maddubs`' i16 pair sums (AVX2, where each `dot` costs
        /// a `madd` with ones and an add more) rather than `dot`'s i32 lanes (VNNI, one
        /// instruction either way).
        const I16_SUMS: bool = $i16_sums;

        /// `dot` for a short run of byte products that one scale then multiplies: at most 4
        /// calls per accumulator with weights under 32, or 2 under 64, so that i16 pair sums
        /// cannot overflow (4 · 2 · 31 · 128 = 31744).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn dot_sub(acc: I, u: B, s: B) -> I {
            if I16_SUMS {
                _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s))
            } else {
                dot(acc, u, s)
            }
        }

        /// [`dot_sub`] sums as `dot` leaves them.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn sub_sums(p: I) -> I {
            if I16_SUMS {
                _mm256_madd_epi16(p, _mm256_set1_epi16(1))
            } else {
                p
            }
        }

        /// [`dot_sub`] sums of rows 0-3 (`p[0]`) and 4-7 (`p[1]`), less `off` per row, times
        /// each row's scale (the 8 bytes at `scales`, signed or not): one lane per row. From
        /// i16 sums, `madd` multiplies and pairs them in one step.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn scaled_rows(p: [I; 2], off: R, scales: *const u8, signed: bool) -> R {
            if I16_SUMS {
                let x = _mm_loadl_epi64(scales as *const __m128i);
                let x16 = if signed { _mm_cvtepi8_epi16(x) } else { _mm_cvtepu8_epi16(x) };
                let x = _mm256_broadcastsi128_si256(x16);
                // Row r's i16 scale in the 4 i16 lanes of its sums: rows 0-1 | 2-3 (4-5 | 6-7).
                let rows = |h: i8| {
                    let (a, b) = (8 * h, 8 * h + 2);
                    let (c, d) = (8 * h + 4, 8 * h + 6);
                    _mm256_setr_epi8(
                        a, a + 1, a, a + 1, a, a + 1, a, a + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1,
                        c, c + 1, c, c + 1, c, c + 1, c, c + 1, d, d + 1, d, d + 1, d, d + 1, d, d + 1,
                    )
                };
                let scaled = per_row(
                    _mm256_madd_epi16(p[0], _mm256_shuffle_epi8(x, rows(0))),
                    _mm256_madd_epi16(p[1], _mm256_shuffle_epi8(x, rows(1))),
                );
                _mm256_sub_epi32(scaled, _mm256_mullo_epi32(off, _mm256_cvtepi16_epi32(x16)))
            } else {
                _mm256_mullo_epi32(_mm256_sub_epi32(per_row(p[0], p[1]), off), widen8(scales, signed))
            }
        }

        super::super::tiles::repack_tiles!(#[target_feature(enable = $features)]);
        super::super::x86_q4_1::q4_1_kernels!(#[target_feature(enable = $features)]);
    };
}

/// AVX2: `vpmaddubsw` then `vpmaddwd` with ones.
pub mod avx2 {
    repack_kernels!("avx2,fma,f16c", i16_sums: true, |acc, u, s| _mm256_add_epi32(
        acc,
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    ));
}

/// AVX-VNNI (`vpdpbusd`, VEX-encoded).
pub mod avx_vnni {
    repack_kernels!(
        "avx2,fma,f16c,avxvnni",
        i16_sums: false,
        |acc, u, s| _mm256_dpbusd_avx_epi32(acc, u, s)
    );
}

/// AVX-512 VNNI (`vpdpbusd` on 256-bit registers, which also gives 32 of them).
pub mod avx512_vnni {
    repack_kernels!("avx2,fma,f16c,avx512f,avx512vl,avx512vnni", i16_sums: false, |acc, u, s| {
        _mm256_dpbusd_epi32(acc, u, s)
    });
}
