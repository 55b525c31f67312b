//! The repacked kernels' tiles, written once over a set of primitives that each kernel build
//! (the x86 ones in [`super::x86`], SIMD128 in [`super::simd128`]) defines in the module that
//! invokes [`repack_tiles`]:
//!
//! - `B`, 32 quant or activation bytes: 8-byte chunks of 4 rows, or one chunk repeated
//!   (`load`, `bcast8`, `nibbles`, `fifth_bit`, `q6_high`, `or_b`, `q8_operands`);
//! - `I`, integer sums of byte products in whatever lanes the build likes: `dot_sub(I, u, s)`
//!   (unsigned `u` under 128, signed `s`; the activation side one chunk repeated) over a short
//!   run of products that one scale multiplies (the AVX2 and relaxed-SIMD builds keep i16 sums,
//!   so a run is at most 4 products of weights under 32, or 2 under 64), then either
//!   `sub_sums` and `per_row(rows 0-3, rows 4-7)`, one lane per row, or `scaled_rows([rows
//!   0-3, rows 4-7], off, 8 scale bytes, signed)`, one lane per row, less `off`, times that
//!   row's scale; `dot_q8::<N, FUSED_DOT>` (Q8_0's operands from `q8_operands::<N>`, for a
//!   tile of `N` activation rows; `FUSED_DOT` picks between a build's two forms where it has
//!   two), folded by `per_row` after `q8_sums::<N, FUSED_DOT>`;
//! - `R`, one i32 lane per row (`zero_r`, `add_r`, `sub_r`, `splat_r`);
//! - `F`, one f32 lane per row (`zero_f`, `sub_f`, `mul_f`, `splat_f`, `to_f`, `f16x8::<N>`
//!   (8 weight scales, for a tile of `N` activation rows: a build may convert differently per
//!   `N`),
//!   `f16_to_f32` (one activation scale), `add_scaled` = `acc + f32(isum) * scale` unfused,
//!   `store_f`);
//! - `prefetch(p)`, a hint to fetch the cache line at `p` (a no-op where the build has none);
//! - `k4_msum(mins, bsums)`, Q4_K/Q5_K's Σ_j m_j Σa per row (`R`), from the 8 sub-blocks' mins
//!   of the 8 rows (`mins[8j + r]`) and the activations' 16-element sums.
//!
//! Integer sums are exact in any order, and every float step is the reference's
//! ([`super::reference`]), so every build gives the same bits. `$attr`: the attributes of each
//! tile function (an x86 build's `target_feature`).

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
    pub(crate) d: &'a [f16; 8],
    pub(crate) dmin: &'a [f16; 8],
    pub(crate) scales: &'a [u8; 64],
    pub(crate) mins: &'a [u8; 64],
    pub(crate) qs: &'a [u8; 1024],
    pub(crate) qh: Option<&'a [u8; 256]>,
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

macro_rules! repack_tiles {
    ($(#[$attr:meta])*) => {
        /// Activation rows per tile.
        const T: usize = 4;

        use crate::isa::PREFETCH_BYTES;

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
                                store_f(dst.add(i * width), *v);
                            }
                        } else {
                            let res = $tile::<1>(g, [row(0)], [sums(0)]);
                            store_f(dst, res[0]);
                        }
                        t += take;
                    }
                }
            }};
        }

        /// `f` of each element of `a`. `array::map` would do, but in the SIMD128 build LLVM
        /// leaves its closure calls out of line, with their operands passed through memory,
        /// once per block.
        #[inline(always)]
        fn each<X: Copy, Y: Copy, const N: usize>(a: [X; N], f: impl Fn(X) -> Y) -> [Y; N] {
            let mut out = [f(a[0]); N];
            for i in 1..N {
                out[i] = f(a[i]);
            }
            out
        }

        /// Asks for the bytes [`PREFETCH_BYTES`] after group block `gb` (in this group or the
        /// next ones: groups are contiguous), as many as the block has, so that memory keeps
        /// streaming while blocks are computed (the hardware prefetcher alone leaves decode's
        /// matrix-vector products waiting on loads, Q6_K's most).
        #[inline]
        $(#[$attr])*
        unsafe fn prefetch_ahead<G>(gb: &G) {
            let size = std::mem::size_of::<G>();
            let ahead = (gb as *const G as *const u8).wrapping_add(PREFETCH_BYTES);
            for line in (0..size).step_by(64) {
                prefetch(ahead.wrapping_add(line));
            }
        }

        /// Q4_0 and Q5_0: 4-bit quants (plus Q5_0's spread 5th bits) against Q8_0 rows.
        /// `offset` 8 (Q4_0) or 16 (Q5_0) is taken off through the rows' sums.
        #[inline]
        $(#[$attr])*
        unsafe fn legacy4_block<const N: usize>(
            qs: &[u8; 128],
            hb: Option<&[u8; 32]>,
            qa: [*const i8; N],
        ) -> [R; N] {
            let mut ia = [[zero_i(); 2]; N];
            let hb = hb.map(|h| load(h.as_ptr()));
            for c in 0..2 {
                for h in 0..2 {
                    let k = 2 * c + h;
                    let q = load(qs.as_ptr().add(32 * k));
                    let (mut lo, mut hi) = (nibbles(q, 0), nibbles(q, 1));
                    if let Some(hb) = hb {
                        lo = or_b(lo, fifth_bit(hb, k, 0));
                        hi = or_b(hi, fifth_bit(hb, k, 1));
                    }
                    for t in 0..N {
                        ia[t][h] = dot_sub(ia[t][h], lo, bcast8(qa[t].add(8 * c)));
                        ia[t][h] = dot_sub(ia[t][h], hi, bcast8(qa[t].add(16 + 8 * c)));
                    }
                }
            }
            // 4 runs per accumulator, of weights under 32.
            each(ia, |[a, b]| per_row(sub_sums(a), sub_sums(b)))
        }

        /// Q4_0 and Q5_0: `isum - offset · Σa` per block, then the scaled step.
        $(#[$attr])*
        unsafe fn tile_offset<const N: usize, G: crate::repack::tiles::OffsetGroup>(
            g: &[G],
            a: [&[BlockQ8_0]; N],
            sums: [&[i32]; N],
        ) -> [F; N] {
            let mut acc = [zero_f(); N];
            for (b, gb) in g.iter().enumerate() {
                prefetch_ahead(gb);
                let (d, qs, hb) = gb.parts();
                let ia = legacy4_block::<N>(qs, hb, each(a, |a| a[b].qs.as_ptr()));
                let d = f16x8::<N>(d.as_ptr());
                for t in 0..N {
                    let off = splat_r(G::OFFSET * sums[t][b]);
                    let isum = sub_r(ia[t], off);
                    acc[t] = add_scaled(acc[t], isum, mul_f(d, splat_f(f16_to_f32(a[t][b].d))));
                }
            }
            acc
        }

        $(#[$attr])*
        unsafe fn tile_q8_0_with<const N: usize, const FUSED_DOT: bool>(
            g: &[Q8_0x8],
            a: [&[BlockQ8_0]; N],
            _: [&[i32]; N],
        ) -> [F; N] {
            let mut acc = [zero_f(); N];
            for (b, gb) in g.iter().enumerate() {
                prefetch_ahead(gb);
                let mut ia = [[zero_i(); 2]; N];
                let qs = gb.qs.as_ptr() as *const u8;
                for c in 0..4 {
                    for h in 0..2 {
                        let w = load(qs.add(64 * c + 32 * h));
                        for t in 0..N {
                            let (u, s) = q8_operands::<N>(w, bcast8(a[t][b].qs.as_ptr().add(8 * c)));
                            ia[t][h] = dot_q8::<N, FUSED_DOT>(ia[t][h], u, s);
                        }
                    }
                }
                let d = f16x8::<N>(gb.d.as_ptr());
                for t in 0..N {
                    let isum = per_row(q8_sums::<N, FUSED_DOT>(ia[t][0]), q8_sums::<N, FUSED_DOT>(ia[t][1]));
                    acc[t] = add_scaled(acc[t], isum, mul_f(d, splat_f(f16_to_f32(a[t][b].d))));
                }
            }
            acc
        }

        /// One Q4_K/Q5_K super-block: Σ_j sc_j Σ q·a per row.
        #[inline]
        $(#[$attr])*
        unsafe fn k4_isum<const N: usize>(
            qs: &[u8; 1024],
            qh: Option<&[u8; 256]>,
            scales: &[u8; 64],
            qa: [*const i8; N],
        ) -> [R; N] {
            let mut isum = [zero_r(); N];
            for j2 in 0..4 {
                k4_sub::<N, 0>(qs, qh, scales, qa, j2, &mut isum);
                k4_sub::<N, 1>(qs, qh, scales, qa, j2, &mut isum);
            }
            isum
        }

        /// Sub-block `2·j2 + PART` of a Q4_K/Q5_K super-block (`PART` 0 the low nibbles of
        /// bytes 32·j2.., 1 the high ones) into `isum`; `PART` a constant so that the nibble
        /// shift is one (see [`q6_k_sub`]).
        #[inline]
        $(#[$attr])*
        unsafe fn k4_sub<const N: usize, const PART: usize>(
            qs: &[u8; 1024],
            qh: Option<&[u8; 256]>,
            scales: &[u8; 64],
            qa: [*const i8; N],
            j2: usize,
            isum: &mut [R; N],
        ) {
            let mut p = [[zero_i(); 2]; N];
            for cl in 0..4 {
                for h in 0..2 {
                    let k = 2 * cl + h;
                    let mut x = nibbles(load(qs.as_ptr().add(256 * j2 + 32 * k)), PART);
                    if let Some(qh) = qh {
                        let hb = load(qh.as_ptr().add(64 * j2 + 32 * (k / 4)));
                        x = or_b(x, fifth_bit(hb, k, PART));
                    }
                    for t in 0..N {
                        let av = bcast8(qa[t].add(64 * j2 + 32 * PART + 8 * cl));
                        p[t][h] = dot_sub(p[t][h], x, av);
                    }
                }
            }
            // 4 runs per accumulator, of weights under 32.
            let sc = scales.as_ptr().add(8 * (2 * j2 + PART));
            for t in 0..N {
                isum[t] = add_r(isum[t], scaled_rows(p[t], zero_r(), sc, false));
            }
        }

        #[inline]
        $(#[$attr])*
        unsafe fn k4_finish(acc: F, isum: R, msum: R, d: F, dmin: F, da: f32) -> F {
            let da = splat_f(da);
            let acc = add_scaled(acc, isum, mul_f(d, da));
            sub_f(acc, mul_f(to_f(msum), mul_f(dmin, da)))
        }

        /// Q4_K and Q5_K.
        $(#[$attr])*
        unsafe fn tile_k4<const N: usize, G: crate::repack::tiles::K4Group>(
            g: &[G],
            a: [&[BlockQ8K]; N],
            _: [&[i32]; N],
        ) -> [F; N] {
            let mut acc = [zero_f(); N];
            for (b, gb) in g.iter().enumerate() {
                prefetch_ahead(gb);
                let p = gb.parts();
                let isum = k4_isum::<N>(p.qs, p.qh, p.scales, each(a, |a| a[b].qs.as_ptr()));
                let (d, dmin) = (f16x8::<N>(p.d.as_ptr()), f16x8::<N>(p.dmin.as_ptr()));
                for t in 0..N {
                    let msum = k4_msum(p.mins, &a[t][b].bsums);
                    acc[t] = k4_finish(acc[t], isum[t], msum, d, dmin, a[t][b].d);
                }
            }
            acc
        }

        $(#[$attr])*
        unsafe fn tile_q6_k<const N: usize>(g: &[Q6Kx8], a: [&[BlockQ8K]; N], _: [&[i32]; N]) -> [F; N] {
            let mut acc = [zero_f(); N];
            for (b, gb) in g.iter().enumerate() {
                prefetch_ahead(gb);
                let ab = each(a, |a| &a[b]);
                let mut isum = [zero_r(); N];
                for hf in 0..2 {
                    for cc2 in 0..2 {
                        q6_k_sub::<N, 0, 0>(gb, ab, hf, cc2, &mut isum);
                        q6_k_sub::<N, 1, 0>(gb, ab, hf, cc2, &mut isum);
                    }
                    for cc2 in 2..4 {
                        q6_k_sub::<N, 0, 2>(gb, ab, hf, cc2, &mut isum);
                        q6_k_sub::<N, 1, 2>(gb, ab, hf, cc2, &mut isum);
                    }
                }
                let d = f16x8::<N>(gb.d.as_ptr());
                for t in 0..N {
                    acc[t] = add_scaled(acc[t], isum[t], mul_f(d, splat_f(ab[t].d)));
                }
            }
            acc
        }

        /// Q6_K sub-block `8hf + 4PART + cc2` of one group block into `isum`: chunks 2cc2 and
        /// 2cc2+1 of half `hf`, their low nibbles (`PART` 0) or high ones (1), with the qh bits
        /// at `SHIFT` (0 for chunks 0-3, 2 for 4-7) above them; times the rows' sub-block
        /// scales, the offset 32 taken off through the activations' sums. `PART` and `SHIFT` are
        /// constants so that every shift is one: as loop variables, the wasm engine's code
        /// shifted by register counts and branched between left and right shifts.
        #[inline]
        $(#[$attr])*
        unsafe fn q6_k_sub<const N: usize, const PART: usize, const SHIFT: usize>(
            gb: &Q6Kx8,
            a: [&BlockQ8K; N],
            hf: usize,
            cc2: usize,
            isum: &mut [R; N],
        ) {
            let mut p = [[zero_i(); 2]; N];
            for cc in 2 * cc2..2 * cc2 + 2 {
                let c = 8 * hf + cc;
                let qc = 4 * hf + cc % 4;
                // Elements of the low nibbles; the high nibbles are 64 further.
                let first = if SHIFT == 0 { 8 * cc } else { 32 + 8 * (cc - 4) };
                for h in 0..2 {
                    let ql = load(gb.ql.as_ptr().add(64 * c + 32 * h));
                    let qh = load(gb.qh.as_ptr().add(64 * qc + 32 * h));
                    let x = or_b(nibbles(ql, PART), q6_high(qh, SHIFT + 4 * PART));
                    for t in 0..N {
                        let av = bcast8(a[t].qs.as_ptr().add(128 * hf + 64 * PART + first));
                        p[t][h] = dot_sub(p[t][h], x, av);
                    }
                }
            }
            // 2 runs per accumulator, of weights under 64.
            let j = 8 * hf + 4 * PART + cc2;
            let sc = gb.scales.as_ptr().add(8 * j) as *const u8;
            for t in 0..N {
                let off = splat_r(32 * a[t].bsums[j] as i32);
                isum[t] = add_r(isum[t], scaled_rows(p[t], off, sc, true));
            }
        }

        /// The per-type tiles `drive!` calls (it takes one generic parameter, the tokens).
        $(#[$attr])*
        unsafe fn tile_q4_0<const N: usize>(g: &[Q4_0x8], a: [&[BlockQ8_0]; N], s: [&[i32]; N]) -> [F; N] {
            tile_offset::<N, Q4_0x8>(g, a, s)
        }
        $(#[$attr])*
        unsafe fn tile_q5_0<const N: usize>(g: &[Q5_0x8], a: [&[BlockQ8_0]; N], s: [&[i32]; N]) -> [F; N] {
            tile_offset::<N, Q5_0x8>(g, a, s)
        }
        $(#[$attr])*
        unsafe fn tile_q8_0<const N: usize>(g: &[Q8_0x8], a: [&[BlockQ8_0]; N], s: [&[i32]; N]) -> [F; N] {
            tile_q8_0_with::<N, false>(g, a, s)
        }
        $(#[$attr])*
        unsafe fn tile_q8_0_fused_dot<const N: usize>(g: &[Q8_0x8], a: [&[BlockQ8_0]; N], s: [&[i32]; N]) -> [F; N] {
            tile_q8_0_with::<N, true>(g, a, s)
        }
        $(#[$attr])*
        unsafe fn tile_q4_k<const N: usize>(g: &[Q4Kx8], a: [&[BlockQ8K]; N], s: [&[i32]; N]) -> [F; N] {
            tile_k4::<N, Q4Kx8>(g, a, s)
        }
        $(#[$attr])*
        unsafe fn tile_q5_k<const N: usize>(g: &[Q5Kx8], a: [&[BlockQ8K]; N], s: [&[i32]; N]) -> [F; N] {
            tile_k4::<N, Q5Kx8>(g, a, s)
        }

        /// The entry points: `nb` blocks per row, `groups` of `nb` group blocks each,
        /// `n_acts` activation rows of `nb` blocks, `sums` (Q4_0/Q5_0 only) each activation
        /// block's Σa; `out[t * 8 * n_groups + 8 * group + r]`. `FUSED_DOT`: the form of
        /// `dot_q8` (a build with one form ignores it).
        ///
        /// # Safety
        /// The CPU must have this module's features; `out` must hold `n_acts * 8 * n_groups`
        /// floats and `acts`/`sums` `n_acts * nb` entries.
        // With the build's attributes, so that the stores of `drive!` inline here.
        $(#[$attr])*
        pub unsafe fn gemm<const FUSED_DOT: bool>(
            kind: crate::repack::Kind,
            nb: usize,
            groups: &[u8],
            acts: &[u8],
            n_acts: usize,
            sums: &[i32],
            out: &mut [f32],
        ) {
            use crate::repack::Kind;
            let (g, a) = (groups, acts);
            match kind {
                Kind::Q4_0 => drive!(tile_q4_0, nb, bytemuck::cast_slice::<u8, Q4_0x8>(g), bytemuck::cast_slice::<u8, BlockQ8_0>(a), n_acts, sums, out),
                Kind::Q4_1 => unreachable!("Q4_1 has kernels of its own (x86_q4_1.rs)"),
                Kind::Q5_0 => drive!(tile_q5_0, nb, bytemuck::cast_slice::<u8, Q5_0x8>(g), bytemuck::cast_slice::<u8, BlockQ8_0>(a), n_acts, sums, out),
                Kind::Q8_0 if FUSED_DOT => drive!(tile_q8_0_fused_dot, nb, bytemuck::cast_slice::<u8, Q8_0x8>(g), bytemuck::cast_slice::<u8, BlockQ8_0>(a), n_acts, sums, out),
                Kind::Q8_0 => drive!(tile_q8_0, nb, bytemuck::cast_slice::<u8, Q8_0x8>(g), bytemuck::cast_slice::<u8, BlockQ8_0>(a), n_acts, sums, out),
                Kind::Q4_K => drive!(tile_q4_k, nb, bytemuck::cast_slice::<u8, Q4Kx8>(g), bytemuck::cast_slice::<u8, BlockQ8K>(a), n_acts, sums, out),
                Kind::Q5_K => drive!(tile_q5_k, nb, bytemuck::cast_slice::<u8, Q5Kx8>(g), bytemuck::cast_slice::<u8, BlockQ8K>(a), n_acts, sums, out),
                Kind::Q6_K => drive!(tile_q6_k, nb, bytemuck::cast_slice::<u8, Q6Kx8>(g), bytemuck::cast_slice::<u8, BlockQ8K>(a), n_acts, sums, out),
            }
        }
    };
}

pub(crate) use repack_tiles;
