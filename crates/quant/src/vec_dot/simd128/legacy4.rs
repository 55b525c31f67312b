//! The legacy quants' four-output kernels: four weight rows × one activation row (`rows4`,
//! decode's matrix-vector product) and one weight row × four activation rows (`x4`, batches).
//! Each output is bit-identical to the single-row kernel's: the same integer lanes per block
//! (exact, however they are formed) and the same float operations in the same order.
//!
//! What they save over four single-row calls, where most of the time went:
//! - The f16 scales become f32 four at a time in SIMD lanes (`isa::Simd128::f16_bits_to_f32`), not one
//!   by one in `half`'s branchy software conversion (up to four per block before).
//! - What the outputs share is prepared once: a gemv's activation row (bytes, scales and, for
//!   Q8_0, its widening to i16) once for all weight rows; a gemm's four activation rows once
//!   for all weight rows; in `x4` each weight block's unpacked quants once for the four
//!   activation rows. The block scale products `d_w · d_a` and the min terms
//!   `fma(m_w, s_a, summs)` of the four outputs take one SIMD operation each.
//! - Signed 4- and 5-bit weights (Q4_0, Q5_0) use the relaxed build's `relaxed_dot` too: their
//!   unsigned nibbles `u = q + o` lie in 0..=31, and `Σ a·q = Σ a·u - o·Σ a` (the activation
//!   sums come from a second `relaxed_dot` against ones, folded into the accumulator input).
//! - Q8_0 × Q8_0 forms its byte products as i16 dot products (`pmaddwd`), each side widened
//!   once (even and odd bytes apart, so that two pair sums add up to ggml's lanes).

use super::*;
use crate::isa::simd::simd128::{any_f16_nonfinite, konst, splat_u32, F16_SCALE};
use crate::isa::Simd128;

/// Lane `L` of `v` in all four lanes.
#[inline(always)]
fn splat_lane<const L: usize>(v: v128) -> v128 {
    i32x4_shuffle::<L, L, L, L>(v, v)
}

/// A legacy block's two f16 header fields as u32 bits: `d` low, `m` (weights) or `s`
/// (Q8_1 activations) high; 0 high for the types without one.
pub(super) trait ScaleBits: Copy {
    fn scale_bits(&self) -> u32;
}

/// Four blocks' [`ScaleBits`], one per u32 lane.
#[inline(always)]
fn scale_bits4<B: ScaleBits>(b: [&B; 4]) -> v128 {
    u32x4(
        b[0].scale_bits(),
        b[1].scale_bits(),
        b[2].scale_bits(),
        b[3].scale_bits(),
    )
}

/// The `d` (low) halves of [`ScaleBits`] lanes as f32.
#[inline(always)]
fn low_scales(bits: v128) -> v128 {
    Simd128.f16_bits_to_f32(v128_and(bits, u32x4_splat(0xffff)))
}

/// The `m` / `s` (high) halves of [`ScaleBits`] lanes as f32.
#[inline(always)]
fn high_scales(bits: v128) -> v128 {
    Simd128.f16_bits_to_f32(u32x4_shr(bits, 16))
}

/// [`low_scales`] and [`high_scales`] of the same lanes. Where no half is infinite or NaN
/// (exponent 31: no real block's scale), each half's exponent and mantissa shifted into an f32's
/// place and scaled by 2^112 is its value, subnormals included (as in `isa::Simd128::f16_bits_to_f32`), and
/// the sign goes on top: 11 instructions for both halves, against twice that (and more
/// constants, which V8 rebuilds in the loop) for the two general conversions.
#[inline(always)]
fn widen_scales(bits: v128) -> (v128, v128) {
    if any_f16_nonfinite(bits) {
        return (low_scales(bits), high_scales(bits));
    }
    // An f16's exponent and mantissa, moved to bits 13..28.
    static FIELD: v128 = splat_u32(0x0fff_e000);
    static SIGN: v128 = splat_u32(0x8000_0000);
    let (field, scale, sign) = (konst(&FIELD), konst(&F16_SCALE), konst(&SIGN));
    let low = v128_or(
        f32x4_mul(v128_and(i32x4_shl(bits, 13), field), scale),
        v128_and(i32x4_shl(bits, 16), sign),
    );
    let high = v128_or(
        f32x4_mul(v128_and(u32x4_shr(bits, 3), field), scale),
        v128_and(bits, sign),
    );
    (low, high)
}

impl ScaleBits for BlockQ8_0 {
    #[inline(always)]
    fn scale_bits(&self) -> u32 {
        self.d.to_bits() as u32
    }
}

impl ScaleBits for BlockQ8_1 {
    #[inline(always)]
    fn scale_bits(&self) -> u32 {
        self.d.to_bits() as u32 | (self.s.to_bits() as u32) << 16
    }
}

/// A legacy weight type as the four-output kernels see it (implemented by the marker types
/// below): its block and activation partner, the quants unpacked once per block, the
/// activation block prepared once per block, and the 8 integer lanes of their dot product
/// (ggml's lane l = bytes 4l..4l+4 of every 32).
pub(super) trait LegacyWeight {
    type Block: ScaleBits + bytemuck::Pod;
    type Act: ScaleBits;
    type Quants: Copy;
    type Prep: Copy;
    /// Whether `summs += m_w · s_a` is part of the result (Q4_1, Q5_1).
    const HAS_MIN: bool;
    /// Whether `lanes::<true>` (the fused 4-byte dot product, `isa::CpuFeatures::fused_dot`)
    /// differs from `lanes::<false>` (the unsigned types'); the others have one form.
    const HAS_FUSED_FORM: bool;
    fn quants(w: &Self::Block) -> Self::Quants;
    fn prep(a: &Self::Act) -> Self::Prep;
    fn lanes<const FUSED_DOT: bool>(q: &Self::Quants, a: &Self::Prep) -> [v128; 2];
}

pub(super) struct Q4_0;
pub(super) struct Q4_1;
pub(super) struct Q5_0;
pub(super) struct Q5_1;
pub(super) struct Q8_0;

#[inline(always)]
fn act_bytes(qs: &[i8; QK]) -> [v128; 2] {
    let a = i8_bytes(qs);
    [load16(a, 0), load16(a, 16)]
}

/// Unsigned weights (0..=31) with a min × Q8_1.
macro_rules! unsigned_with_min {
    ($T:ty, $W:ty, $quants:expr) => {
        impl ScaleBits for $W {
            #[inline(always)]
            fn scale_bits(&self) -> u32 {
                self.d.to_bits() as u32 | (self.m.to_bits() as u32) << 16
            }
        }
        impl LegacyWeight for $T {
            type Block = $W;
            type Act = BlockQ8_1;
            type Quants = [v128; 2];
            type Prep = [v128; 2];
            const HAS_MIN: bool = true;
            const HAS_FUSED_FORM: bool = true;
            #[inline(always)]
            fn quants(w: &$W) -> [v128; 2] {
                $quants(w)
            }
            #[inline(always)]
            fn prep(a: &BlockQ8_1) -> [v128; 2] {
                act_bytes(&a.qs)
            }
            #[inline(always)]
            fn lanes<const FUSED_DOT: bool>(q: &[v128; 2], a: &[v128; 2]) -> [v128; 2] {
                [
                    quad_sums_u7::<FUSED_DOT>(q[0], a[0]),
                    quad_sums_u7::<FUSED_DOT>(q[1], a[1]),
                ]
            }
        }
    };
}

unsigned_with_min!(Q4_1, BlockQ4_1, |x: &BlockQ4_1| nibbles_32(&x.qs));
unsigned_with_min!(Q5_1, BlockQ5_1, |x: &BlockQ5_1| q5_quants(&x.qs, x.qh));

/// Signed weights stored as unsigned `u = q + OFFSET` (Q4_0: 8, Q5_0: 16) × Q8_0.
macro_rules! offset_signed {
    ($T:ty, $W:ty, $offset:expr, $unsigned:expr) => {
        impl ScaleBits for $W {
            #[inline(always)]
            fn scale_bits(&self) -> u32 {
                self.d.to_bits() as u32
            }
        }
        impl LegacyWeight for $T {
            type Block = $W;
            type Act = BlockQ8_0;
            type Quants = [v128; 2];
            /// The activation bytes and, in the relaxed build, `-OFFSET · (their 4-byte sums)`.
            type Prep = ([v128; 2], [v128; 2]);
            const HAS_MIN: bool = false;
            const HAS_FUSED_FORM: bool = false;
            #[inline(always)]
            fn quants(w: &$W) -> [v128; 2] {
                let u: [v128; 2] = $unsigned(w);
                if cfg!(target_feature = "relaxed-simd") {
                    u
                } else {
                    let o = i8x16_splat($offset);
                    [i8x16_sub(u[0], o), i8x16_sub(u[1], o)]
                }
            }
            #[inline(always)]
            fn prep(a: &BlockQ8_0) -> Self::Prep {
                let a = act_bytes(&a.qs);
                #[cfg(target_feature = "relaxed-simd")]
                {
                    let ones = i8x16_splat(1);
                    let neg = |v: v128| {
                        i32x4_mul(
                            i32x4_relaxed_dot_i8x16_i7x16_add(v, ones, i32x4_splat(0)),
                            i32x4_splat(-$offset),
                        )
                    };
                    (a, [neg(a[0]), neg(a[1])])
                }
                #[cfg(not(target_feature = "relaxed-simd"))]
                (a, a)
            }
            #[inline(always)]
            fn lanes<const FUSED_DOT: bool>(q: &[v128; 2], p: &Self::Prep) -> [v128; 2] {
                #[cfg(target_feature = "relaxed-simd")]
                {
                    // Exact: the i16 pair sums of bytes × 0..=31 cannot saturate.
                    let (a, neg) = p;
                    [
                        i32x4_relaxed_dot_i8x16_i7x16_add(a[0], q[0], neg[0]),
                        i32x4_relaxed_dot_i8x16_i7x16_add(a[1], q[1], neg[1]),
                    ]
                }
                #[cfg(not(target_feature = "relaxed-simd"))]
                [quad_sums_i8(q[0], p.0[0]), quad_sums_i8(q[1], p.0[1])]
            }
        }
    };
}

offset_signed!(Q4_0, BlockQ4_0, 8, |x: &BlockQ4_0| nibbles_32(&x.qs));
offset_signed!(Q5_0, BlockQ5_0, 16, |x: &BlockQ5_0| q5_quants(&x.qs, x.qh));

/// 32 signed bytes widened to i16 in the order that makes ggml's lanes one add: the even
/// bytes of 0..16, its odd bytes, then the same of 16..32 (a shift left and an arithmetic
/// shift right per 16-bit lane, no shuffles). Pair sums (`pmaddwd`) of the even bytes give
/// bytes 4l and 4l+2 of lane l, of the odd bytes 4l+1 and 4l+3.
#[inline(always)]
fn widen_i16_paired(b: [v128; 2]) -> [v128; 4] {
    let even = |v: v128| i16x8_shr(i16x8_shl(v, 8), 8);
    let odd = |v: v128| i16x8_shr(v, 8);
    [even(b[0]), odd(b[0]), even(b[1]), odd(b[1])]
}

/// Q8_0 weights (the same blocks as its activations).
impl LegacyWeight for Q8_0 {
    type Block = BlockQ8_0;
    type Act = BlockQ8_0;
    type Quants = [v128; 4];
    type Prep = [v128; 4];
    const HAS_MIN: bool = false;
    const HAS_FUSED_FORM: bool = false;
    #[inline(always)]
    fn quants(w: &BlockQ8_0) -> [v128; 4] {
        widen_i16_paired(act_bytes(&w.qs))
    }
    #[inline(always)]
    fn prep(a: &BlockQ8_0) -> [v128; 4] {
        widen_i16_paired(act_bytes(&a.qs))
    }
    #[inline(always)]
    fn lanes<const FUSED_DOT: bool>(q: &[v128; 4], a: &[v128; 4]) -> [v128; 2] {
        let pairs = |i: usize| i32x4_dot_i16x8(q[i], a[i]);
        [i32x4_add(pairs(0), pairs(1)), i32x4_add(pairs(2), pairs(3))]
    }
}

/// Output `R` of a four-output kernel: block scale `splat_lane::<R>(d4)` times the lanes.
#[inline(always)]
fn accumulate<const R: usize>(acc: &mut [Acc; 4], d4: v128, lanes: [v128; 2]) {
    let d = splat_lane::<R>(d4);
    acc[R].lo = fma_f32x4(d, f32x4_convert_i32x4(lanes[0]), acc[R].lo);
    acc[R].hi = fma_f32x4(d, f32x4_convert_i32x4(lanes[1]), acc[R].hi);
}

/// The four results: ggml's 8-lane sum, plus lane r of the min terms where the type has them.
#[inline(always)]
fn finish<W: LegacyWeight>(acc: [Acc; 4], summs: v128) -> [f32; 4] {
    let summs = f32x4_to_array(summs);
    std::array::from_fn(|r| {
        if W::HAS_MIN {
            Acc {
                summs: summs[r],
                ..acc[r]
            }
            .finish_summs()
        } else {
            acc[r].finish_plain()
        }
    })
}

/// The 8 lanes of weight block `w` against a prepared activation block.
#[inline(always)]
fn block_lanes<W: LegacyWeight, const FUSED_DOT: bool>(w: &W::Block, a: &W::Prep) -> [v128; 2] {
    W::lanes::<FUSED_DOT>(&W::quants(w), a)
}

/// One activation row's block, prepared once for every weight row of a gemv: its scales `d`
/// and `s` each in all four lanes, and the type's activation preparation.
#[derive(Clone, Copy)]
struct ActOne<P> {
    d: v128,
    s: v128,
    prep: P,
}

/// Four weight rows × one prepared activation row. `ahead`: the bytes the caller reads next
/// (the following rows of a gemv, or empty), touched at the pace this loop reads its own.
#[inline(always)]
fn rows4<W: LegacyWeight, const FUSED_DOT: bool>(
    ws: [&[W::Block]; 4],
    y: &[ActOne<W::Prep>],
    ahead: &[u8],
) -> [f32; 4] {
    let min_w = ws.iter().map(|w| w.len()).min().unwrap_or(0);
    let nb = min_w.min(y.len());
    // Slices of exactly `nb` blocks, so that indexing below needs no bounds checks.
    let (ws, y) = (ws.map(|w| &w[..nb]), &y[..nb]);
    let mut acc = [Acc::new(); 4];
    let mut summs = f32x4_splat(0.0);
    let mut touched = 0u8;
    let step = 4 * std::mem::size_of::<W::Block>();
    for i in 0..nb {
        // wasm has no prefetch instruction, and the hardware prefetcher alone leaves this loop
        // waiting on memory (Gemma 3's 178 MB output matrix ran at half the speed of the same
        // rows in cache): plain loads of the next rows' cache lines, one group of four rows
        // ahead, start those misses early. Their bytes only feed `touched`, never a result.
        for off in [0, 64] {
            if let Some(b) = ahead.get(step * i + off) {
                touched ^= *b;
            }
        }
        let a = &y[i];
        let (d_w, m_w) = widen_scales(scale_bits4([&ws[0][i], &ws[1][i], &ws[2][i], &ws[3][i]]));
        // d_w · d_a per row (the single-row kernel's `w.d * y.d`).
        let d4 = f32x4_mul(d_w, a.d);
        if W::HAS_MIN {
            // fma(m_w, s_a, summs) per row.
            summs = fma_f32x4(m_w, a.s, summs);
        }
        let lanes = |r: usize| block_lanes::<W, FUSED_DOT>(&ws[r][i], &a.prep);
        accumulate::<0>(&mut acc, d4, lanes(0));
        accumulate::<1>(&mut acc, d4, lanes(1));
        accumulate::<2>(&mut acc, d4, lanes(2));
        accumulate::<3>(&mut acc, d4, lanes(3));
    }
    std::hint::black_box(touched);
    finish::<W>(acc, summs)
}

/// Block `i` of four activation rows, prepared once for every weight row of a gemm: their
/// scales `d` (and `s`) as f32 lanes and the type's activation preparation.
#[derive(Clone, Copy)]
struct ActGroup<P> {
    d: v128,
    s: v128,
    prep: [P; 4],
}

/// The first `nb` blocks of four activation rows as [`ActGroup`]s, into `out`.
#[inline(always)]
fn act_groups<W: LegacyWeight>(ys: [&[W::Act]; 4], nb: usize, out: &mut Vec<ActGroup<W::Prep>>) {
    out.clear();
    // A plain index loop: `extend` over a mapping closure and `array::from_fn` stayed
    // out-of-line calls here, their operands going through memory.
    #[allow(clippy::needless_range_loop)]
    for i in 0..nb {
        let (d, s) = widen_scales(scale_bits4([&ys[0][i], &ys[1][i], &ys[2][i], &ys[3][i]]));
        let prep = [
            W::prep(&ys[0][i]),
            W::prep(&ys[1][i]),
            W::prep(&ys[2][i]),
            W::prep(&ys[3][i]),
        ];
        out.push(ActGroup { d, s, prep });
    }
}

/// A weight block decoded once for all the activation groups it meets: its quants unpacked and
/// its scale and min (zero for the types without one, never read) converted to f32.
#[derive(Clone, Copy)]
struct Decoded<Q> {
    q: Q,
    d: f32,
    m: f32,
}

#[inline(always)]
fn decode<W: LegacyWeight>(w: &W::Block) -> Decoded<W::Quants> {
    // Both halves in SIMD lanes (the high half is 0 for the types without a min), not in
    // `half`'s software conversion.
    let (d, m) = widen_scales(u32x4_splat(w.scale_bits()));
    Decoded {
        q: W::quants(w),
        d: f32x4_extract_lane::<0>(d),
        m: f32x4_extract_lane::<0>(m),
    }
}

/// One weight row (its blocks decoded) × the four activation rows of `groups` (one entry per
/// block).
#[inline(always)]
fn x4_groups<W: LegacyWeight, const FUSED_DOT: bool>(
    x: impl Iterator<Item = Decoded<W::Quants>>,
    groups: &[ActGroup<W::Prep>],
) -> [f32; 4] {
    let mut acc = [Acc::new(); 4];
    let mut summs = f32x4_splat(0.0);
    for (w, g) in x.zip(groups) {
        if W::HAS_MIN {
            // fma(m_w, s_a, summs) per activation row.
            summs = fma_f32x4(f32x4_splat(w.m), g.s, summs);
        }
        // d_w · d_a per activation row.
        let d4 = f32x4_mul(f32x4_splat(w.d), g.d);
        accumulate::<0>(&mut acc, d4, W::lanes::<FUSED_DOT>(&w.q, &g.prep[0]));
        accumulate::<1>(&mut acc, d4, W::lanes::<FUSED_DOT>(&w.q, &g.prep[1]));
        accumulate::<2>(&mut acc, d4, W::lanes::<FUSED_DOT>(&w.q, &g.prep[2]));
        accumulate::<3>(&mut acc, d4, W::lanes::<FUSED_DOT>(&w.q, &g.prep[3]));
    }
    finish::<W>(acc, summs)
}

/// Whether to run `W`'s fused-dot form (see [`LegacyWeight::HAS_FUSED_FORM`]).
#[inline(always)]
fn use_fused_dot<W: LegacyWeight>() -> bool {
    W::HAS_FUSED_FORM && crate::isa::detected().fused_dot
}

/// One weight row × four activation rows.
pub(super) fn x4<W: LegacyWeight>(n: usize, x: &[W::Block], ys: [&[W::Act]; 4]) -> [f32; 4] {
    let min_act = ys.iter().map(|y| y.len()).min().unwrap_or(0);
    let nb = block_count(n, QK, x.len(), min_act);
    let mut groups = Vec::with_capacity(nb);
    act_groups::<W>(ys, nb, &mut groups);
    let x = x[..nb].iter().map(decode::<W>);
    if use_fused_dot::<W>() {
        x4_groups::<W, true>(x, &groups)
    } else {
        x4_groups::<W, false>(x, &groups)
    }
}

/// A type's single-row kernel on typed blocks.
type SingleRow<W> = fn(usize, &[<W as LegacyWeight>::Block], &[<W as LegacyWeight>::Act]) -> f32;

/// Weight rows × activation rows on typed blocks (the caller views the bytes once per call,
/// not once per kernel call): `out[t * n_rows + r]`, each element bit-identical to `single`.
/// One activation row (decode) goes four weight rows at a time ([`rows4`]); longer batches four
/// activation rows at a time, those four prepared once for all weight rows ([`x4_groups`]);
/// what is left over row by row with `single`.
pub(super) fn gemm<W: LegacyWeight>(
    single: SingleRow<W>,
    n: usize,
    w: &[W::Block],
    n_rows: usize,
    a: &[W::Act],
    n_acts: usize,
    out: &mut [f32],
) {
    if use_fused_dot::<W>() {
        gemm_with::<W, true>(single, n, w, n_rows, a, n_acts, out)
    } else {
        gemm_with::<W, false>(single, n, w, n_rows, a, n_acts, out)
    }
}

/// [`gemm`] in the given form of the dot product.
fn gemm_with<W: LegacyWeight, const FUSED_DOT: bool>(
    single: SingleRow<W>,
    n: usize,
    w: &[W::Block],
    n_rows: usize,
    a: &[W::Act],
    n_acts: usize,
    out: &mut [f32],
) {
    if n_rows == 0 || n_acts == 0 {
        return;
    }
    let (wb, ab) = (w.len() / n_rows, a.len() / n_acts);
    let row = |r: usize| &w[r * wb..(r + 1) * wb];
    let act = |t: usize| &a[t * ab..(t + 1) * ab];
    let nb = block_count(n, QK, wb, ab);
    if n_acts == 1 {
        let prepared: Vec<ActOne<W::Prep>> = act(0)[..nb]
            .iter()
            .map(|a| {
                let bits = u32x4_splat(a.scale_bits());
                ActOne {
                    d: low_scales(bits),
                    s: high_scales(bits),
                    prep: W::prep(a),
                }
            })
            .collect();
        let full = n_rows / 4 * 4;
        let bytes: &[u8] = bytemuck::cast_slice(w);
        let group_bytes = 4 * wb * std::mem::size_of::<W::Block>();
        for r in (0..full).step_by(4) {
            let next = (r / 4 + 1) * group_bytes;
            let ahead = &bytes[next.min(bytes.len())..(next + group_bytes).min(bytes.len())];
            let rows = [row(r), row(r + 1), row(r + 2), row(r + 3)];
            let d = rows4::<W, FUSED_DOT>(rows, &prepared, ahead);
            out[r..r + 4].copy_from_slice(&d);
        }
        for (r, o) in out[..n_rows].iter_mut().enumerate().skip(full) {
            *o = single(n, row(r), act(0));
        }
        return;
    }
    let full = n_acts / 4 * 4;
    // With two or more groups of four activations, every weight block is decoded once per
    // call, not once per group: unpacking the quants (Q5_0's fifth bits most of all) and
    // converting the scales cost about as much as a block's multiply-adds with one group.
    let decoded = decode_rows_once(w, n_rows, nb, n_acts, decode::<W>);
    let mut groups = Vec::with_capacity(nb);
    for t in (0..full).step_by(4) {
        act_groups::<W>(
            [act(t), act(t + 1), act(t + 2), act(t + 3)],
            nb,
            &mut groups,
        );
        for r in 0..n_rows {
            let d = match &decoded {
                Some(d) => {
                    x4_groups::<W, FUSED_DOT>(d[r * nb..(r + 1) * nb].iter().copied(), &groups)
                }
                None => x4_groups::<W, FUSED_DOT>(row(r)[..nb].iter().map(decode::<W>), &groups),
            };
            for (i, v) in d.into_iter().enumerate() {
                out[(t + i) * n_rows + r] = v;
            }
        }
    }
    for t in full..n_acts {
        for r in 0..n_rows {
            out[t * n_rows + r] = single(n, row(r), act(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use rand::{Rng, SeedableRng};
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Random blocks of any bytes but finite, positive-or-negative scales.
    fn random_blocks<B: bytemuck::Pod>(rng: &mut rand::rngs::StdRng, count: usize) -> Vec<B> {
        let mut blocks: Vec<B> = vec![bytemuck::Zeroable::zeroed(); count];
        for byte in bytemuck::cast_slice_mut::<B, u8>(&mut blocks) {
            *byte = rng.random();
        }
        // The two f16 header fields lead every legacy block.
        for block in bytemuck::cast_slice_mut::<B, u8>(&mut blocks).chunks_mut(size_of::<B>()) {
            for h in 0..2 {
                let x = f16::from_f32(rng.random_range(-2.0f32..2.0) / 64.0).to_le_bytes();
                block[2 * h..2 * h + 2].copy_from_slice(&x);
            }
        }
        blocks
    }

    /// Both forms of the unsigned types' dot product give the single-row kernel's bits, in
    /// decode (`rows4`, and the rows left over) and in batches (`x4_groups`, from blocks
    /// decoded as they come and decoded once).
    fn both_forms_match_single<W: LegacyWeight<Act: bytemuck::Pod>>(single: SingleRow<W>) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (nb, n_rows) = (5, 7);
        let w: Vec<W::Block> = random_blocks(&mut rng, nb * n_rows);
        // 1: decode; 5: a group of four and one left over; 9: weight blocks decoded once.
        for n_acts in [1, 5, 9] {
            let a: Vec<W::Act> = random_blocks(&mut rng, nb * n_acts);
            for fused in [false, true] {
                let mut out = vec![f32::NAN; n_rows * n_acts];
                let run = if fused {
                    gemm_with::<W, true>
                } else {
                    gemm_with::<W, false>
                };
                run(single, nb * QK, &w, n_rows, &a, n_acts, &mut out);
                for t in 0..n_acts {
                    for r in 0..n_rows {
                        let want =
                            single(nb * QK, &w[r * nb..(r + 1) * nb], &a[t * nb..(t + 1) * nb]);
                        let got = out[t * n_rows + r];
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "fused {fused} row {r} act {t}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn q4_1_and_q5_1_fused_and_composed_dots_match_the_single_row_kernel() {
        both_forms_match_single::<Q4_1>(vec_dot_q4_1_q8_1);
        both_forms_match_single::<Q5_1>(vec_dot_q5_1_q8_1);
    }

    /// Both halves of every f16 (paired with other values, infinities and NaNs among them, so
    /// the general path runs too), as `half` widens them.
    #[test]
    fn widen_scales_matches_half() {
        for h in (0..=u16::MAX as u32).step_by(4) {
            let pair = |k: u32| (h + k) | ((h + k).wrapping_mul(40503) & 0xffff) << 16;
            let bits = u32x4(pair(0), pair(1), pair(2), pair(3));
            let (low, high) = widen_scales(bits);
            let (low, high) = (f32x4_to_array(low), f32x4_to_array(high));
            for k in 0..4 {
                let b = pair(k as u32);
                let want = |x: u32| f16::from_bits(x as u16).to_f32().to_bits();
                assert_eq!(low[k].to_bits(), want(b & 0xffff), "{b:#010x} low");
                assert_eq!(high[k].to_bits(), want(b >> 16), "{b:#010x} high");
            }
        }
    }
}
