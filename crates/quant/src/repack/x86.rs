//! x86-64 kernels on the repacked layouts, written once ([`repack_kernels`]) and built three
//! times: AVX2 (`maddubs` + `madd`), AVX-VNNI and AVX-512 VNNI (`vpdpbusd` on 256-bit
//! registers). Only the integer dot product differs between them, and integer sums are exact,
//! so all three give the reference's bits ([`super::reference`]).
//!
//! A tile is one group (8 weight rows, one f32 lane each) × `T` activation rows. Integer sums
//! of a 32-byte register of quant bytes (4 rows × 8 bytes) against a broadcast of 8 activation
//! bytes come out as two lanes per row; [`per_row`] folds two such registers into one lane per
//! row, rows in order.

use super::layout::{Q4Kx8, Q4_0x8, Q5Kx8, Q5_0x8};
use half::f16;

/// A 4-bit legacy group whose weights carry an offset (x = d · (q - OFFSET)), with Q5_0's
/// spread 5th bits where it has them.
pub(crate) trait OffsetGroup: bytemuck::Pod {
    const OFFSET: i32;
    fn parts(&self) -> (&[f16; 8], &[u8; 128], Option<&[u8; 32]>);
}

impl OffsetGroup for Q4_0x8 {
    const OFFSET: i32 = 8;
    fn parts(&self) -> (&[f16; 8], &[u8; 128], Option<&[u8; 32]>) {
        (&self.d, &self.qs, None)
    }
}

impl OffsetGroup for Q5_0x8 {
    const OFFSET: i32 = 16;
    fn parts(&self) -> (&[f16; 8], &[u8; 128], Option<&[u8; 32]>) {
        (&self.d, &self.qs, Some(&self.qh))
    }
}

/// The fields of a Q4_K or Q5_K group (`qh`: Q5_K's spread 5th bits).
pub(crate) struct K4Parts<'a> {
    d: &'a [f16; 8],
    dmin: &'a [f16; 8],
    scales: &'a [u8; 64],
    mins: &'a [u8; 64],
    qs: &'a [u8; 1024],
    qh: Option<&'a [u8; 256]>,
}

pub(crate) trait K4Group: bytemuck::Pod {
    fn parts(&self) -> K4Parts<'_>;
}

impl K4Group for Q4Kx8 {
    fn parts(&self) -> K4Parts<'_> {
        K4Parts {
            d: &self.d,
            dmin: &self.dmin,
            scales: &self.scales,
            mins: &self.mins,
            qs: &self.qs,
            qh: None,
        }
    }
}

impl K4Group for Q5Kx8 {
    fn parts(&self) -> K4Parts<'_> {
        K4Parts {
            d: &self.d,
            dmin: &self.dmin,
            scales: &self.scales,
            mins: &self.mins,
            qs: &self.qs,
            qh: Some(&self.qh),
        }
    }
}

macro_rules! repack_kernels {
    ($features:literal, |$acc:ident, $u:ident, $s:ident| $dot:expr) => {
        use crate::blocks::*;
        use crate::repack::layout::*;
        use std::arch::x86_64::*;

        /// Unsigned × signed bytes, summed in groups of 4 into the 8 i32 lanes of `acc`.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn dot($acc: __m256i, $u: __m256i, $s: __m256i) -> __m256i {
            $dot
        }

        /// Activation rows per tile.
        const T: usize = 4;

        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn load(p: *const u8) -> __m256i {
            _mm256_loadu_si256(p as *const __m256i)
        }

        /// 8 activation bytes, repeated for 4 rows.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn bcast8(p: *const i8) -> __m256i {
            _mm256_set1_epi64x((p as *const i64).read_unaligned())
        }

        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn f16x8(p: *const half::f16) -> __m256 {
            _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
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
            let x = match 2 * (k % 4) + part {
                0 => _mm256_slli_epi16(hb, 4),
                1 => _mm256_slli_epi16(hb, 3),
                2 => _mm256_slli_epi16(hb, 2),
                3 => _mm256_slli_epi16(hb, 1),
                4 => hb,
                5 => _mm256_srli_epi16(hb, 1),
                6 => _mm256_srli_epi16(hb, 2),
                _ => _mm256_srli_epi16(hb, 3),
            };
            _mm256_and_si256(x, _mm256_set1_epi8(0x10))
        }

        /// Q6_K's two high bits at `shift` (0, 2, 4, 6) moved to bits 4-5.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q6_high(qh: __m256i, shift: usize) -> __m256i {
            let x = match shift {
                0 => _mm256_slli_epi16(qh, 4),
                2 => _mm256_slli_epi16(qh, 2),
                4 => qh,
                _ => _mm256_srli_epi16(qh, 2),
            };
            _mm256_and_si256(x, _mm256_set1_epi8(0x30))
        }

        /// Rows of one group × `N` activation rows, through the tile function `$tile`, for
        /// every group; `out[t * width + 8 * group + r]`.
        macro_rules! drive {
            ($tile:ident, $nb:expr, $groups:expr, $acts:expr, $n_acts:expr, $sums:expr, $out:expr) => {{
                let nb = $nb;
                let n_groups = $groups.len() / nb;
                let width = n_groups * ROWS;
                for gi in 0..n_groups {
                    let g = &$groups[gi * nb..(gi + 1) * nb];
                    let mut t = 0;
                    while t < $n_acts {
                        let take = if t + T <= $n_acts { T } else { 1 };
                        let row = |i: usize| &$acts[(t + i) * nb..(t + i + 1) * nb];
                        let sums = |i: usize| $sums.get((t + i) * nb..(t + i + 1) * nb).unwrap_or(&[]);
                        let dst = $out.as_mut_ptr().add(t * width + gi * ROWS);
                        if take == T {
                            let res = $tile::<T>(g, [row(0), row(1), row(2), row(3)], [sums(0), sums(1), sums(2), sums(3)]);
                            for (i, v) in res.iter().enumerate() {
                                _mm256_storeu_ps(dst.add(i * width), *v);
                            }
                        } else {
                            let res = $tile::<1>(g, [row(0)], [sums(0)]);
                            _mm256_storeu_ps(dst, res[0]);
                        }
                        t += take;
                    }
                }
            }};
        }

        /// Q4_0, Q4_1 and Q5_0: 4-bit quants (plus Q5_0's spread 5th bits) against Q8_0 or
        /// Q8_1 rows. `offset` 8 (Q4_0) or 16 (Q5_0) is taken off through the rows' sums.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn legacy4_block<const N: usize>(
            qs: &[u8; 128],
            hb: Option<&[u8; 32]>,
            qa: [*const i8; N],
        ) -> [__m256i; N] {
            let mut ia = [[_mm256_setzero_si256(); 2]; N];
            let hb = hb.map(|h| load(h.as_ptr()));
            for c in 0..2 {
                for h in 0..2 {
                    let k = 2 * c + h;
                    let q = load(qs.as_ptr().add(32 * k));
                    let (mut lo, mut hi) = (nibbles(q, 0), nibbles(q, 1));
                    if let Some(hb) = hb {
                        lo = _mm256_or_si256(lo, fifth_bit(hb, k, 0));
                        hi = _mm256_or_si256(hi, fifth_bit(hb, k, 1));
                    }
                    for t in 0..N {
                        ia[t][h] = dot(ia[t][h], lo, bcast8(qa[t].add(8 * c)));
                        ia[t][h] = dot(ia[t][h], hi, bcast8(qa[t].add(16 + 8 * c)));
                    }
                }
            }
            ia.map(|[a, b]| per_row(a, b))
        }

        /// Q4_0 and Q5_0: `isum - offset · Σa` per block, then the scaled step.
        #[target_feature(enable = $features)]
        unsafe fn tile_offset<const N: usize, G: super::OffsetGroup>(
            g: &[G],
            a: [&[BlockQ8_0]; N],
            sums: [&[i32]; N],
        ) -> [__m256; N] {
            let mut acc = [_mm256_setzero_ps(); N];
            for (b, gb) in g.iter().enumerate() {
                let (d, qs, hb) = gb.parts();
                let ia = legacy4_block::<N>(qs, hb, a.map(|a| a[b].qs.as_ptr()));
                let d = f16x8(d.as_ptr());
                for t in 0..N {
                    let off = _mm256_set1_epi32(G::OFFSET * sums[t][b]);
                    let isum = _mm256_sub_epi32(ia[t], off);
                    acc[t] = add_scaled(acc[t], isum, _mm256_mul_ps(d, _mm256_set1_ps(a[t][b].d.to_f32())));
                }
            }
            acc
        }

        #[target_feature(enable = $features)]
        unsafe fn tile_q4_1<const N: usize>(g: &[Q4_1x8], a: [&[BlockQ8_1]; N], _: [&[i32]; N]) -> [__m256; N] {
            let mut acc = [_mm256_setzero_ps(); N];
            for (b, gb) in g.iter().enumerate() {
                let ia = legacy4_block::<N>(&gb.qs, None, a.map(|a| a[b].qs.as_ptr()));
                let (d, m) = (f16x8(gb.d.as_ptr()), f16x8(gb.m.as_ptr()));
                for t in 0..N {
                    let act = &a[t][b];
                    acc[t] = add_scaled(acc[t], ia[t], _mm256_mul_ps(d, _mm256_set1_ps(act.d.to_f32())));
                    acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(m, _mm256_set1_ps(act.s.to_f32())));
                }
            }
            acc
        }

        #[target_feature(enable = $features)]
        unsafe fn tile_q8_0<const N: usize>(g: &[Q8_0x8], a: [&[BlockQ8_0]; N], _: [&[i32]; N]) -> [__m256; N] {
            let mut acc = [_mm256_setzero_ps(); N];
            for (b, gb) in g.iter().enumerate() {
                let mut ia = [[_mm256_setzero_si256(); 2]; N];
                let qs = gb.qs.as_ptr() as *const u8;
                for c in 0..4 {
                    for h in 0..2 {
                        let w = load(qs.add(64 * c + 32 * h));
                        let u = _mm256_sign_epi8(w, w);
                        for t in 0..N {
                            let s = _mm256_sign_epi8(bcast8(a[t][b].qs.as_ptr().add(8 * c)), w);
                            ia[t][h] = dot(ia[t][h], u, s);
                        }
                    }
                }
                let d = f16x8(gb.d.as_ptr());
                for t in 0..N {
                    let isum = per_row(ia[t][0], ia[t][1]);
                    acc[t] = add_scaled(acc[t], isum, _mm256_mul_ps(d, _mm256_set1_ps(a[t][b].d.to_f32())));
                }
            }
            acc
        }

        /// One Q4_K/Q5_K super-block: Σ_j sc_j Σ q·a per row.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn k4_isum<const N: usize>(
            qs: &[u8; 1024],
            qh: Option<&[u8; 256]>,
            scales: &[u8; 64],
            qa: [*const i8; N],
        ) -> [__m256i; N] {
            let mut isum = [_mm256_setzero_si256(); N];
            for j2 in 0..4 {
                for part in 0..2 {
                    let mut p = [[_mm256_setzero_si256(); 2]; N];
                    for cl in 0..4 {
                        for h in 0..2 {
                            let k = 2 * cl + h;
                            let mut x = nibbles(load(qs.as_ptr().add(256 * j2 + 32 * k)), part);
                            if let Some(qh) = qh {
                                let hb = load(qh.as_ptr().add(64 * j2 + 32 * (k / 4)));
                                x = _mm256_or_si256(x, fifth_bit(hb, k, part));
                            }
                            for t in 0..N {
                                let av = bcast8(qa[t].add(64 * j2 + 32 * part + 8 * cl));
                                p[t][h] = dot(p[t][h], x, av);
                            }
                        }
                    }
                    let sc = widen8(scales.as_ptr().add(8 * (2 * j2 + part)), false);
                    for t in 0..N {
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(per_row(p[t][0], p[t][1]), sc));
                    }
                }
            }
            isum
        }

        /// Σ_j m_j Σ a per row, from the activations' 16-element sums.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn k4_msum(mins: &[u8; 64], bsums: &[i16; 16]) -> __m256i {
            let mut m = _mm256_setzero_si256();
            for j in 0..8 {
                let bs = bsums[2 * j] as i32 + bsums[2 * j + 1] as i32;
                m = _mm256_add_epi32(m, _mm256_mullo_epi32(widen8(mins.as_ptr().add(8 * j), false), _mm256_set1_epi32(bs)));
            }
            m
        }

        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn k4_finish(acc: __m256, isum: __m256i, msum: __m256i, d: __m256, dmin: __m256, da: f32) -> __m256 {
            let da = _mm256_set1_ps(da);
            let acc = add_scaled(acc, isum, _mm256_mul_ps(d, da));
            _mm256_sub_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, da)))
        }

        /// Q4_K and Q5_K.
        #[target_feature(enable = $features)]
        unsafe fn tile_k4<const N: usize, G: super::K4Group>(
            g: &[G],
            a: [&[BlockQ8K]; N],
            _: [&[i32]; N],
        ) -> [__m256; N] {
            let mut acc = [_mm256_setzero_ps(); N];
            for (b, gb) in g.iter().enumerate() {
                let p = gb.parts();
                let isum = k4_isum::<N>(p.qs, p.qh, p.scales, a.map(|a| a[b].qs.as_ptr()));
                let (d, dmin) = (f16x8(p.d.as_ptr()), f16x8(p.dmin.as_ptr()));
                for t in 0..N {
                    let msum = k4_msum(p.mins, &a[t][b].bsums);
                    acc[t] = k4_finish(acc[t], isum[t], msum, d, dmin, a[t][b].d);
                }
            }
            acc
        }

        #[target_feature(enable = $features)]
        unsafe fn tile_q6_k<const N: usize>(g: &[Q6Kx8], a: [&[BlockQ8K]; N], _: [&[i32]; N]) -> [__m256; N] {
            let mut acc = [_mm256_setzero_ps(); N];
            for (b, gb) in g.iter().enumerate() {
                let mut isum = [_mm256_setzero_si256(); N];
                for hf in 0..2 {
                    for cc2 in 0..4 {
                        for part in 0..2 {
                            let mut p = [[_mm256_setzero_si256(); 2]; N];
                            for cc in 2 * cc2..2 * cc2 + 2 {
                                let c = 8 * hf + cc;
                                let qc = 4 * hf + cc % 4;
                                // Elements of the low nibbles; the high nibbles are 64 further.
                                let (first, shift) = if cc < 4 { (8 * cc, 0) } else { (32 + 8 * (cc - 4), 2) };
                                for h in 0..2 {
                                    let ql = load(gb.ql.as_ptr().add(64 * c + 32 * h));
                                    let qh = load(gb.qh.as_ptr().add(64 * qc + 32 * h));
                                    let x = _mm256_or_si256(nibbles(ql, part), q6_high(qh, shift + 4 * part));
                                    for t in 0..N {
                                        let av = bcast8(a[t][b].qs.as_ptr().add(128 * hf + 64 * part + first));
                                        p[t][h] = dot(p[t][h], x, av);
                                    }
                                }
                            }
                            // Sub-block 8hf+cc2 holds the low nibbles of this chunk pair, 8hf+4+cc2 the high.
                            let j = 8 * hf + 4 * part + cc2;
                            let sc = widen8(gb.scales.as_ptr().add(8 * j) as *const u8, true);
                            for t in 0..N {
                                let off = _mm256_set1_epi32(32 * a[t][b].bsums[j] as i32);
                                let s = _mm256_sub_epi32(per_row(p[t][0], p[t][1]), off);
                                isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s, sc));
                            }
                        }
                    }
                }
                let d = f16x8(gb.d.as_ptr());
                for t in 0..N {
                    acc[t] = add_scaled(acc[t], isum[t], _mm256_mul_ps(d, _mm256_set1_ps(a[t][b].d)));
                }
            }
            acc
        }

        /// The per-type tiles `drive!` calls (it takes one generic parameter, the tokens).
        #[target_feature(enable = $features)]
        unsafe fn tile_q4_0<const N: usize>(g: &[Q4_0x8], a: [&[BlockQ8_0]; N], s: [&[i32]; N]) -> [__m256; N] {
            tile_offset::<N, Q4_0x8>(g, a, s)
        }
        #[target_feature(enable = $features)]
        unsafe fn tile_q5_0<const N: usize>(g: &[Q5_0x8], a: [&[BlockQ8_0]; N], s: [&[i32]; N]) -> [__m256; N] {
            tile_offset::<N, Q5_0x8>(g, a, s)
        }
        #[target_feature(enable = $features)]
        unsafe fn tile_q4_k<const N: usize>(g: &[Q4Kx8], a: [&[BlockQ8K]; N], s: [&[i32]; N]) -> [__m256; N] {
            tile_k4::<N, Q4Kx8>(g, a, s)
        }
        #[target_feature(enable = $features)]
        unsafe fn tile_q5_k<const N: usize>(g: &[Q5Kx8], a: [&[BlockQ8K]; N], s: [&[i32]; N]) -> [__m256; N] {
            tile_k4::<N, Q5Kx8>(g, a, s)
        }

        /// The entry points: `nb` blocks per row, `groups` of `nb` group blocks each,
        /// `n_acts` activation rows of `nb` blocks, `sums` (Q4_0/Q5_0 only) each activation
        /// block's Σa; `out[t * 8 * n_groups + 8 * group + r]`.
        ///
        /// # Safety
        /// The CPU must have this module's features; `out` must hold `n_acts * 8 * n_groups`
        /// floats and `acts`/`sums` `n_acts * nb` entries.
        pub unsafe fn gemm(
            kind: super::super::Kind,
            nb: usize,
            groups: &[u8],
            acts: &[u8],
            n_acts: usize,
            sums: &[i32],
            out: &mut [f32],
        ) {
            use super::super::Kind;
            let (g, a) = (groups, acts);
            match kind {
                Kind::Q4_0 => drive!(tile_q4_0, nb, bytemuck::cast_slice::<u8, Q4_0x8>(g), bytemuck::cast_slice::<u8, BlockQ8_0>(a), n_acts, sums, out),
                Kind::Q4_1 => drive!(tile_q4_1, nb, bytemuck::cast_slice::<u8, Q4_1x8>(g), bytemuck::cast_slice::<u8, BlockQ8_1>(a), n_acts, sums, out),
                Kind::Q5_0 => drive!(tile_q5_0, nb, bytemuck::cast_slice::<u8, Q5_0x8>(g), bytemuck::cast_slice::<u8, BlockQ8_0>(a), n_acts, sums, out),
                Kind::Q8_0 => drive!(tile_q8_0, nb, bytemuck::cast_slice::<u8, Q8_0x8>(g), bytemuck::cast_slice::<u8, BlockQ8_0>(a), n_acts, sums, out),
                Kind::Q4_K => drive!(tile_q4_k, nb, bytemuck::cast_slice::<u8, Q4Kx8>(g), bytemuck::cast_slice::<u8, BlockQ8K>(a), n_acts, sums, out),
                Kind::Q5_K => drive!(tile_q5_k, nb, bytemuck::cast_slice::<u8, Q5Kx8>(g), bytemuck::cast_slice::<u8, BlockQ8K>(a), n_acts, sums, out),
                Kind::Q6_K => drive!(tile_q6_k, nb, bytemuck::cast_slice::<u8, Q6Kx8>(g), bytemuck::cast_slice::<u8, BlockQ8K>(a), n_acts, sums, out),
            }
        }
    };
}

/// AVX2: `vpmaddubsw` then `vpmaddwd` with ones.
pub mod avx2 {
    repack_kernels!("avx2,fma,f16c", |acc, u, s| _mm256_add_epi32(
        acc,
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    ));
}

/// AVX-VNNI (`vpdpbusd`, VEX-encoded).
pub mod avx_vnni {
    repack_kernels!(
        "avx2,fma,f16c,avxvnni",
        |acc, u, s| _mm256_dpbusd_avx_epi32(acc, u, s)
    );
}

/// AVX-512 VNNI (`vpdpbusd` on 256-bit registers, which also gives 32 of them).
pub mod avx512_vnni {
    repack_kernels!("avx2,fma,f16c,avx512f,avx512vl,avx512vnni", |acc, u, s| {
        _mm256_dpbusd_epi32(acc, u, s)
    });
}
