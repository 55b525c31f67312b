//! wasm32 SIMD128 vec-dot kernels, bit-identical to the portable ggml-x86-order kernels
//! (`ggml_order.rs`), so the browser build computes exactly what the native build (AVX2) and
//! llama.cpp compute, and produces the same tokens.
//!
//! - Integer parts are exact however they are formed: products of bytes are widened to i16
//!   (`extmul`), summed in pairs into i32 (`extadd_pairwise`, or `dot` with the K-quants' i16
//!   sub-block scales), and pairs of pairs are added at the end of a block to give ggml's 8 lanes
//!   (lane l = bytes 4l..4l+4 of every 32-byte group).
//! - ggml's 8-lane f32 accumulator is two f32x4. wasm has no FMA instruction (`f32::mul_add` is
//!   a slow software `fmaf`), so each per-block `fmaf(d, f32(lane), acc)` is computed in f64x2
//!   lanes: the product is exact in f64 and one f64 add rounds once; rounding that to f32 is
//!   `fmaf`'s result except when the f64 sum sits exactly on an f32 midpoint (then TwoSum's
//!   error term says which way to round, in f64x2 lanes too) or outside the normal f32 range
//!   (rare: those lanes call `mul_add`). `fma_f64.rs` states the method in scalar code, with its
//!   proof tests. The once-per-block scalar FMAs of the min terms call `mul_add` (the software
//!   `fmaf` costs ~12 ns there against ~18 ns for the scalar emulation: not worth replacing).
//! - Reductions are ggml's `hsum_float_8` order; the min terms are kept as ggml keeps them.
//!
//! As in `avx2.rs`, each legacy kernel is a per-block `prep` (unpack a weight block) and `step`
//! (multiply one activation block into an accumulator); the `_x4` kernels run one prep and four
//! steps, so each of their results is bit-identical to the single-row kernel's. The K-quant
//! single-row kernels unpack each 16-element chunk where they multiply it (a whole unpacked
//! super-block does not stay in registers); their x4 kernels unpack once for four rows.
//!
//! Built only with `target_feature = "simd128"` enabled at compile time (`.cargo/config.toml`),
//! so the intrinsics are safe to call; only the unaligned loads are `unsafe`.
//!
//! With `target_feature = "relaxed-simd"` as well (the browser package's `-relaxed` builds), the
//! FMAs are `f32x4.relaxed_madd` and the byte dot products of 7-bit weights (Q4_1, Q5_1, Q2_K,
//! Q4_K, Q5_K) `i32x4.relaxed_dot_i8x16_i7x16_add_s`: the same bits wherever relaxed_madd is fused
//! and relaxed_dot exact, which [`relaxed_simd_is_exact`] checks at load (the loader falls back
//! to the plain SIMD128 build elsewhere).

use super::fma_f64::{BELOW_F32_MANTISSA, F32_MIDPOINT_BITS, F32_MIN_NORMAL};
use crate::blocks::*;
use core::arch::wasm32::*;

mod legacy4;

fn block_count(n: usize, qk: usize, w_len: usize, a_len: usize) -> usize {
    debug_assert_eq!(n % qk, 0, "row length {n} is not a multiple of {qk}");
    debug_assert!(
        w_len >= n / qk && a_len >= n / qk,
        "rows shorter than {n} elements"
    );
    (n / qk).min(w_len).min(a_len)
}

// ---------------------------------------------------------------------------------------------
// Loads and integer helpers

/// 16 bytes of `bytes` from `offset` (bounds-checked; the offsets are constants per block).
#[inline(always)]
fn load16(bytes: &[u8], offset: usize) -> v128 {
    let chunk = &bytes[offset..offset + 16];
    // SAFETY: `chunk` is 16 readable bytes, and v128_load has no alignment requirement.
    unsafe { v128_load(chunk.as_ptr() as *const v128) }
}

#[inline(always)]
fn i8_bytes(v: &[i8]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// Pair sums of 16 signed byte products, as i32: (bytes 0..8, bytes 8..16).
#[inline(always)]
fn pair_sums_i8(w: v128, a: v128) -> (v128, v128) {
    (
        i32x4_extadd_pairwise_i16x8(i16x8_extmul_low_i8x16(w, a)),
        i32x4_extadd_pairwise_i16x8(i16x8_extmul_high_i8x16(w, a)),
    )
}

/// Four of ggml's lanes from eight pair sums: lane l = pair 2l + pair 2l+1.
#[inline(always)]
fn quads(pairs_lo: v128, pairs_hi: v128) -> v128 {
    i32x4_add(
        i32x4_shuffle::<0, 2, 4, 6>(pairs_lo, pairs_hi),
        i32x4_shuffle::<1, 3, 5, 7>(pairs_lo, pairs_hi),
    )
}

/// ggml's four lanes of 16 signed byte products (lane l = bytes 4l..4l+4).
#[inline(always)]
fn quad_sums_i8(w: v128, a: v128) -> v128 {
    let (lo, hi) = pair_sums_i8(w, a);
    quads(lo, hi)
}

/// Byte j is 0xFF where bit j of `bits` is set, else 0 (bytes 0..16, bytes 16..32).
#[inline(always)]
fn bits_to_bytes_32(bits: u32) -> [v128; 2] {
    let v = u32x4_splat(bits);
    let select = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    let lo = i8x16_shuffle::<0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1>(v, v);
    let hi = i8x16_shuffle::<2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3>(v, v);
    [
        i8x16_eq(v128_and(lo, select), select),
        i8x16_eq(v128_and(hi, select), select),
    ]
}

// ---------------------------------------------------------------------------------------------
// Float accumulation (ggml's FMA, emulated exactly)

/// Lanes whose f64 sum `r` is not a normal f32 magnitude (zero, f32-subnormal, NaN): there f32
/// rounding steps differ, and these rare lanes go to `mul_add`.
#[inline(always)]
fn outside_f32_normal(r: v128) -> v128 {
    v128_not(f64x2_ge(f64x2_abs(r), f64x2_splat(F32_MIN_NORMAL)))
}

/// Lanes where the f64 sum `r` lies exactly halfway between two f32 values.
#[inline(always)]
fn on_f32_midpoint(r: v128) -> v128 {
    let low = v128_and(r, u64x2_splat(BELOW_F32_MANTISSA));
    i64x2_eq(low, u64x2_splat(F32_MIDPOINT_BITS))
}

/// `r = p + c` rounded to f64, corrected where it sits on an f32 midpoint that the exact sum
/// does not: moved one f64 ulp towards the exact sum (TwoSum gives the rounding error), so
/// that rounding to f32 goes the right way (as `fma_f64::fma_f32` does).
#[inline(always)]
fn fix_midpoints(r: v128, p: v128, c: v128) -> v128 {
    let c_part = f64x2_sub(r, p);
    let p_part = f64x2_sub(r, c_part);
    let err = f64x2_add(f64x2_sub(p, p_part), f64x2_sub(c, c_part));
    let fix = v128_andnot(on_f32_midpoint(r), f64x2_eq(err, f64x2_splat(0.0)));
    // +1 (away from zero) where err and r have the same sign, else -1.
    let step = v128_or(i64x2_shr(v128_xor(err, r), 63), i64x2_splat(1));
    i64x2_add(r, v128_and(step, fix))
}

/// Four lanes of `fmaf(d, f32(sums), acc)` (ggml: `_mm256_fmadd_ps(set1(d), cvtepi32_ps(sums),
/// acc)`, one half of it).
#[inline(always)]
fn fma4(d: f32, sums: v128, acc: v128) -> v128 {
    // cvtepi32_ps rounds like f32x4_convert_i32x4 (the sums are small anyway).
    fma_f32x4(f32x4_splat(d), f32x4_convert_i32x4(sums), acc)
}

/// Four lanes of `fmaf(a, b, c)`: `a * b + c` rounded once to f32, bit-identical to
/// `f32::mul_add` lane by lane (`fma_f64::fma_f32`'s method in f64x2 lanes: exact product,
/// one f64 add, TwoSum fix on f32 midpoints; lanes outside the normal f32 range, rare, make
/// the four lanes call `mul_add`). Public for the engine's wasm element-wise kernels.
#[inline(always)]
pub fn fma_f32x4(a: v128, b: v128, c: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        // The relaxed-SIMD build: one fused multiply-add per lane. Only correct where the engine
        // fuses it (x86 with FMA3, ARM64), which the JS loader checks with
        // `relaxed_madd_is_fused` before it picks this build.
        f32x4_relaxed_madd(a, b, c)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    fma_f32x4_f64(a, b, c)
}

/// `fmaf(a, b, c)` for one f32 (the kernels' once-per-block FMAs of the min terms): the
/// relaxed-SIMD build's fused lane, else the software `f32::mul_add`.
#[inline(always)]
fn fma_scalar(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        f32x4_extract_lane::<0>(f32x4_relaxed_madd(
            f32x4_splat(a),
            f32x4_splat(b),
            f32x4_splat(c),
        ))
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    a.mul_add(b, c)
}

/// Whether this engine runs the relaxed-SIMD build exactly: its `f32x4.relaxed_madd` is a fused
/// multiply-add (one rounding) and its `relaxed_dot_i8x16_i7x16_add` gives the exact dot products
/// for 7-bit second operands (and so does `i16x8_relaxed_dot_i8x16_i7x16`). (Node 20's baseline compiler, for one, gets relaxed_dot wrong, so
/// this is checked, not assumed.) The loader runs the relaxed-SIMD build only where this holds.
#[cfg(target_feature = "relaxed-simd")]
pub fn relaxed_simd_is_exact() -> bool {
    // Cases where fused and unfused differ (low product bits that a separate multiply rounds
    // away), each compared with the software `fmaf`.
    let e = 2f32.powi(-12);
    let cases = [
        (1.0 + e, 1.0 + e, -(1.0 + 2.0 * e)),
        (3.0 + 2f32.powi(-20), 5.0 - 2f32.powi(-21), -15.0),
        (0.1, 10.0, -1.0),
    ];
    let fused = cases.iter().all(|&(a, b, c)| {
        let (a, b, c) = std::hint::black_box((a, b, c));
        let want = a.mul_add(b, c);
        let got = f32x4_relaxed_madd(f32x4_splat(a), f32x4_splat(b), f32x4(c, c, c, c));
        want != (a * b + c) // the case tells fused from unfused
            && f32x4_to_array(got).iter().all(|g| g.to_bits() == want.to_bits())
    });
    // Extreme bytes against 7-bit ones, compared with the plain SIMD128 quads.
    let dot_exact = [(-128i8, 127u8), (127, 127), (-1, 1), (-100, 31), (5, 15)]
        .iter()
        .all(|&(a, w)| {
            let a = std::hint::black_box(i8x16(
                a,
                a.wrapping_neg(),
                a,
                3,
                a,
                a,
                -7,
                a,
                0,
                a,
                a,
                1,
                a,
                a.wrapping_neg(),
                a,
                a,
            ));
            let w = std::hint::black_box(u8x16(w, w, 0, w, 1, w, w, 2, w, w, w, 15, 0, w, 7, w));
            let got = i32x4_relaxed_dot_i8x16_i7x16_add(a, w, i32x4_splat(0));
            // The i16 pair sums (the K-quants' form) too.
            let (lo, hi) = (i16x8_extmul_low_i8x16(a, w), i16x8_extmul_high_i8x16(a, w));
            let pairs = i16x8_add(
                i16x8_shuffle::<0, 2, 4, 6, 8, 10, 12, 14>(lo, hi),
                i16x8_shuffle::<1, 3, 5, 7, 9, 11, 13, 15>(lo, hi),
            );
            u32x4_all_true(i32x4_eq(got, quad_sums_i8(w, a)))
                && u16x8_all_true(i16x8_eq(i16x8_relaxed_dot_i8x16_i7x16(a, w), pairs))
        });
    fused && dot_exact
}

/// [`fma_f32x4`] in plain SIMD128: the f64x2 emulation.
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
#[inline(always)]
fn fma_f32x4_f64(a: v128, b: v128, c: v128) -> v128 {
    let a23 = u64x2_shuffle::<1, 1>(a, a);
    let b23 = u64x2_shuffle::<1, 1>(b, b);
    let c23 = u64x2_shuffle::<1, 1>(c, c);
    let p01 = f64x2_mul(f64x2_promote_low_f32x4(a), f64x2_promote_low_f32x4(b));
    let p23 = f64x2_mul(f64x2_promote_low_f32x4(a23), f64x2_promote_low_f32x4(b23));
    let c01 = f64x2_promote_low_f32x4(c);
    let c23 = f64x2_promote_low_f32x4(c23);
    let mut r01 = f64x2_add(p01, c01);
    let mut r23 = f64x2_add(p23, c23);
    if v128_any_true(v128_or(outside_f32_normal(r01), outside_f32_normal(r23))) {
        let lane = |i: usize| {
            let (a, b, c) = (f32x4_to_array(a), f32x4_to_array(b), f32x4_to_array(c));
            a[i].mul_add(b[i], c[i])
        };
        return f32x4(lane(0), lane(1), lane(2), lane(3));
    }
    if v128_any_true(v128_or(on_f32_midpoint(r01), on_f32_midpoint(r23))) {
        r01 = fix_midpoints(r01, p01, c01);
        r23 = fix_midpoints(r23, p23, c23);
    }
    u64x2_shuffle::<0, 2>(f32x4_demote_f64x2_zero(r01), f32x4_demote_f64x2_zero(r23))
}

#[inline(always)]
fn f32x4_to_array(v: v128) -> [f32; 4] {
    [
        f32x4_extract_lane::<0>(v),
        f32x4_extract_lane::<1>(v),
        f32x4_extract_lane::<2>(v),
        f32x4_extract_lane::<3>(v),
    ]
}

/// The accumulators of one output as ggml's kernels keep them: the 8-lane register (two f32x4),
/// Q4_K's 4-lane `acc_m`, and the scalar `summs` of Q4_1 / Q5_1 / Q5_K.
#[derive(Clone, Copy)]
struct Acc {
    lo: v128,
    hi: v128,
    m4: v128,
    summs: f32,
}

impl Acc {
    #[inline(always)]
    fn new() -> Self {
        let z = f32x4_splat(0.0);
        Acc {
            lo: z,
            hi: z,
            m4: z,
            summs: 0.0,
        }
    }

    /// `acc = fma(set1(d), cvtepi32_ps(lanes), acc)` over the 8 lanes.
    #[inline(always)]
    fn fma(&mut self, d: f32, lanes: [v128; 2]) {
        self.lo = fma4(d, lanes[0], self.lo);
        self.hi = fma4(d, lanes[1], self.hi);
    }

    /// `hsum_float_8`: high half + low half, then lanes 0+2 / 1+3, then 0+1.
    #[inline(always)]
    fn hsum8(&self) -> f32 {
        let q = f32x4_add(self.hi, self.lo);
        let h0 = f32x4_extract_lane::<0>(q) + f32x4_extract_lane::<2>(q);
        let h1 = f32x4_extract_lane::<1>(q) + f32x4_extract_lane::<3>(q);
        h0 + h1
    }

    #[inline(always)]
    fn finish_plain(self) -> f32 {
        self.hsum8()
    }

    #[inline(always)]
    fn finish_summs(self) -> f32 {
        self.hsum8() + self.summs
    }

    /// `hsum_float_8(main) + (m4[0] + m4[2]) + (m4[1] + m4[3])` (Q4_K).
    #[inline(always)]
    fn finish_m4(self) -> f32 {
        let m = self.m4;
        let m02 = f32x4_extract_lane::<0>(m) + f32x4_extract_lane::<2>(m);
        let m13 = f32x4_extract_lane::<1>(m) + f32x4_extract_lane::<3>(m);
        self.hsum8() + (m02 + m13)
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy quants (32-element blocks)

/// An unpacked legacy weight block: the 32 quants as signed bytes (elements 0..16, 16..32),
/// the scale and (the "_1" types) the min.
struct LegacyW {
    q: [v128; 2],
    d: f32,
    m: f32,
}

/// Bits `shift..` of every byte of `v`, masked by `mask`, which must fit in `8 - shift` bits: a
/// 16-bit shift and an and. (wasm's `u8x16_shr` is that too on x86, but with a mask V8 builds
/// anew at every use; this mask is a constant it keeps in a register.)
#[inline(always)]
fn byte_bits(v: v128, shift: u32, mask: u8) -> v128 {
    debug_assert!(shift < 8 && (mask as u32) < 1 << (8 - shift));
    v128_and(u16x8_shr(v, shift), u8x16_splat(mask))
}

/// The 32 nibbles of a 4-bit block: low nibbles are elements 0..16, high nibbles 16..32.
#[inline(always)]
fn nibbles_32(qs: &[u8; QK / 2]) -> [v128; 2] {
    let raw = load16(qs, 0);
    [v128_and(raw, u8x16_splat(0x0F)), byte_bits(raw, 4, 0x0F)]
}

/// Nibbles with the 5th bit (from `qh`) as 16.
#[inline(always)]
fn q5_quants(qs: &[u8; QK / 2], qh: [u8; 4]) -> [v128; 2] {
    let nib = nibbles_32(qs);
    let high = bits_to_bytes_32(u32::from_le_bytes(qh));
    let sixteen = u8x16_splat(16);
    [
        v128_or(nib[0], v128_and(high[0], sixteen)),
        v128_or(nib[1], v128_and(high[1], sixteen)),
    ]
}

#[inline(always)]
fn prep_q4_0(x: &BlockQ4_0) -> LegacyW {
    let [lo, hi] = nibbles_32(&x.qs);
    let eight = i8x16_splat(8);
    LegacyW {
        q: [i8x16_sub(lo, eight), i8x16_sub(hi, eight)],
        d: x.d.to_f32(),
        m: 0.0,
    }
}

#[inline(always)]
fn prep_q4_1(x: &BlockQ4_1) -> LegacyW {
    LegacyW {
        q: nibbles_32(&x.qs),
        d: x.d.to_f32(),
        m: x.m.to_f32(),
    }
}

#[inline(always)]
fn prep_q5_0(x: &BlockQ5_0) -> LegacyW {
    let [lo, hi] = q5_quants(&x.qs, x.qh);
    let sixteen = i8x16_splat(16);
    LegacyW {
        q: [i8x16_sub(lo, sixteen), i8x16_sub(hi, sixteen)],
        d: x.d.to_f32(),
        m: 0.0,
    }
}

#[inline(always)]
fn prep_q5_1(x: &BlockQ5_1) -> LegacyW {
    LegacyW {
        q: q5_quants(&x.qs, x.qh),
        d: x.d.to_f32(),
        m: x.m.to_f32(),
    }
}

#[inline(always)]
fn prep_q8_0(x: &BlockQ8_0) -> LegacyW {
    let qs = i8_bytes(&x.qs);
    LegacyW {
        q: [load16(qs, 0), load16(qs, 16)],
        d: x.d.to_f32(),
        m: 0.0,
    }
}

/// The 8 lanes of a legacy block's integer dot product.
#[inline(always)]
fn legacy_lanes(w: &LegacyW, a: &[i8; QK]) -> [v128; 2] {
    let a = i8_bytes(a);
    [
        quad_sums_i8(w.q[0], load16(a, 0)),
        quad_sums_i8(w.q[1], load16(a, 16)),
    ]
}

/// ggml's four lanes of 16 byte products (lane l = bytes 4l..4l+4) where the weights `w` lie in
/// 0..=127 (Q4_1, Q5_1, and the K-quants' unsigned quants). The relaxed-SIMD build forms the i16
/// pair sums in one `i16x8.relaxed_dot_i8x16_i7x16_s` (`pmaddubsw`), exact (deterministic) for
/// 7-bit `w`: they are at most 2 · 128 · 127 in magnitude and cannot saturate; then pairs of
/// pairs (`pmaddwd` by ones). That is the i32x4 form without its add of a zero accumulator.
#[inline(always)]
fn quad_sums_u7(w: v128, a: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        i32x4_extadd_pairwise_i16x8(i16x8_relaxed_dot_i8x16_i7x16(a, w))
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    quad_sums_i8(w, a)
}

/// [`legacy_lanes`] for weights in 0..=127 (Q4_1, Q5_1).
#[inline(always)]
fn legacy_lanes_u7(w: &LegacyW, a: &[i8; QK]) -> [v128; 2] {
    let a = i8_bytes(a);
    [
        quad_sums_u7(w.q[0], load16(a, 0)),
        quad_sums_u7(w.q[1], load16(a, 16)),
    ]
}

/// Signed weights (Q4_0, Q5_0, Q8_0) × Q8_0.
#[inline(always)]
fn step_q8_0(w: &LegacyW, y: &BlockQ8_0, acc: &mut Acc) {
    acc.fma(w.d * y.d.to_f32(), legacy_lanes(w, &y.qs));
}

/// Unsigned weights with a min (Q4_1, Q5_1) × Q8_1: summs += m_w * s_a, then the lanes.
#[inline(always)]
fn step_q8_1(w: &LegacyW, y: &BlockQ8_1, acc: &mut Acc) {
    acc.summs = fma_scalar(w.m, y.s.to_f32(), acc.summs);
    acc.fma(w.d * y.d.to_f32(), legacy_lanes_u7(w, &y.qs));
}

/// A legacy type's kernels: the single-row one from `prep` and `step`, and from `legacy4` the
/// four-activation-rows one (`_x4`) and the gemm (four weight rows per pass for decode).
macro_rules! legacy_kernels {
    ($single:ident, $x4:ident, $gemm:ident, $T:ident, $W:ty, $A:ty, $prep:ident, $step:ident, $finish:ident) => {
        pub fn $single(n: usize, x: &[$W], y: &[$A]) -> f32 {
            let nb = block_count(n, QK, x.len(), y.len());
            let mut acc = Acc::new();
            for (x, y) in x[..nb].iter().zip(&y[..nb]) {
                $step(&$prep(x), y, &mut acc);
            }
            acc.$finish()
        }

        /// One weight row against four activation rows; each result is bit-identical to the
        /// single-row kernel's.
        pub fn $x4(n: usize, x: &[$W], ys: [&[$A]; 4]) -> [f32; 4] {
            legacy4::x4::<legacy4::$T>(n, x, ys)
        }

        /// `n_rows` weight rows × `n_acts` activation rows (see `legacy4::gemm`); each result
        /// is bit-identical to the single-row kernel's.
        pub fn $gemm(n: usize, w: &[$W], n_rows: usize, a: &[$A], n_acts: usize, out: &mut [f32]) {
            legacy4::gemm::<legacy4::$T>($single, n, w, n_rows, a, n_acts, out)
        }
    };
}

legacy_kernels!(
    vec_dot_q4_0_q8_0,
    vec_dot_q4_0_q8_0_x4,
    gemm_q4_0_q8_0,
    Q4_0,
    BlockQ4_0,
    BlockQ8_0,
    prep_q4_0,
    step_q8_0,
    finish_plain
);
legacy_kernels!(
    vec_dot_q4_1_q8_1,
    vec_dot_q4_1_q8_1_x4,
    gemm_q4_1_q8_1,
    Q4_1,
    BlockQ4_1,
    BlockQ8_1,
    prep_q4_1,
    step_q8_1,
    finish_summs
);
legacy_kernels!(
    vec_dot_q5_0_q8_0,
    vec_dot_q5_0_q8_0_x4,
    gemm_q5_0_q8_0,
    Q5_0,
    BlockQ5_0,
    BlockQ8_0,
    prep_q5_0,
    step_q8_0,
    finish_plain
);
legacy_kernels!(
    vec_dot_q5_1_q8_1,
    vec_dot_q5_1_q8_1_x4,
    gemm_q5_1_q8_1,
    Q5_1,
    BlockQ5_1,
    BlockQ8_1,
    prep_q5_1,
    step_q8_1,
    finish_summs
);
legacy_kernels!(
    vec_dot_q8_0_q8_0,
    vec_dot_q8_0_q8_0_x4,
    gemm_q8_0_q8_0,
    Q8_0,
    BlockQ8_0,
    BlockQ8_0,
    prep_q8_0,
    step_q8_0,
    finish_plain
);

// ---------------------------------------------------------------------------------------------
// K-quants (256-element super-blocks) × Q8_K

/// The per-type terms of ggml's K-quant kernels beside the main scaled dot product.
#[derive(Clone, Copy)]
enum KExtra {
    None,
    /// Q2_K: acc += dmin · (mins · bsums, in 8 lanes of pairs), before the main term.
    Q2Mins {
        mins: [v128; 2],
        dmin: f32,
    },
    /// Q4_K: acc_m += dmin · (4 lanes of `madd(mins, hadd(bsums))`).
    Q4Mins {
        mins: v128,
        dmin: f32,
    },
    /// Q5_K: summs += dmin · (the sum of those 4 lanes).
    Q5Mins {
        mins: v128,
        dmin: f32,
    },
    /// Q6_K: lane l -= 32 · (bsums[2l]·sc[2l] + bsums[2l+1]·sc[2l+1]) (the scales as i16x8,
    /// 0..8 and 8..16), as ggml's `q8sclsub`; the quants stay unsigned.
    Q6Offset {
        scales: [v128; 2],
    },
}

/// What a K-quant super-block needs besides its quants: the 16 per-chunk (16-element) scales,
/// `d`, and the min terms.
struct KHeader {
    scales: [i16; 16],
    d: f32,
    extra: KExtra,
}

/// The unpacking of one K-quant type. `chunk(c)` is the 16 signed quants of elements
/// 16c..16c+16. The single-row kernels unpack each chunk right where it is multiplied; the x4
/// kernels unpack a super-block once for four activation rows. Both run the same operations.
trait KQuant {
    /// Whether `chunk`'s quants all lie in 0..=127 (the relaxed build's `relaxed_dot` applies).
    const U7: bool;
    fn header(&self) -> KHeader;
    fn chunk(&self, c: usize) -> v128;
    /// How ggml combines the accumulators at the end (see `Acc`).
    fn finish(acc: Acc) -> f32 {
        acc.finish_plain()
    }
}

/// Q4_K / Q5_K's 4 min lanes: `madd_epi16(mins, hadd_epi16(bsums))`, with wrapping i16 pair sums
/// as the instructions do them.
#[inline(always)]
fn k4_min_lanes(mins: v128, y: &BlockQ8K) -> v128 {
    let b = bytemuck::cast_slice::<i16, u8>(&y.bsums);
    let (lo, hi) = (load16(b, 0), load16(b, 16));
    let pairs = i16x8_add(
        i16x8_shuffle::<0, 2, 4, 6, 8, 10, 12, 14>(lo, hi),
        i16x8_shuffle::<1, 3, 5, 7, 9, 11, 13, 15>(lo, hi),
    );
    i32x4_dot_i16x8(mins, pairs)
}

/// The 8 lanes of a super-block's scaled integer dot product (lane l of half j: the bytes
/// 4l..4l+4 of every 32-group's j-th 16 bytes, times their chunk's scale). Exact integers, so
/// any grouping gives the same lanes; `chunk(c)` gives chunk c's quants and its scale in all
/// eight i16 lanes.
#[inline(always)]
fn k_lanes<const U7: bool>(chunk: impl Fn(usize) -> (v128, v128), a: &[u8]) -> [v128; 2] {
    #[cfg(target_feature = "relaxed-simd")]
    if U7 {
        // ggml's own order of work: the i16 pair sums of each chunk in one relaxed_dot
        // (`pmaddubsw`; exact for 7-bit quants: |pair| ≤ 2 · 128 · 127 cannot saturate), then
        // pairs × scale summed into i32 quads (`pmaddwd`).
        // Chunks two at a time into named accumulators (even chunks: half 0, odd: half 1):
        // indexing an array by `c % 2` made LLVM keep it in memory, a load and a store per chunk.
        let (mut even, mut odd) = (i32x4_splat(0), i32x4_splat(0));
        for c in (0..16).step_by(2) {
            let scaled = |c: usize| {
                let (q, scale) = chunk(c);
                let pairs = i16x8_relaxed_dot_i8x16_i7x16(load16(a, 16 * c), q);
                i32x4_dot_i16x8(pairs, scale)
            };
            even = i32x4_add(even, scaled(c));
            odd = i32x4_add(odd, scaled(c + 1));
        }
        return [even, odd];
    }
    // Pair sums of bytes 0..8, 8..16 (even chunks), 16..24, 24..32 (odd chunks) of every
    // 32-group, in named accumulators (see above).
    let zero = i32x4_splat(0);
    let (mut p0, mut p1, mut p2, mut p3) = (zero, zero, zero, zero);
    for c in (0..16).step_by(2) {
        let scaled = |c: usize| {
            let (q, scale) = chunk(c);
            let av = load16(a, 16 * c);
            (
                i32x4_dot_i16x8(i16x8_extmul_low_i8x16(q, av), scale),
                i32x4_dot_i16x8(i16x8_extmul_high_i8x16(q, av), scale),
            )
        };
        let (lo, hi) = scaled(c);
        p0 = i32x4_add(p0, lo);
        p1 = i32x4_add(p1, hi);
        let (lo, hi) = scaled(c + 1);
        p2 = i32x4_add(p2, lo);
        p3 = i32x4_add(p3, hi);
    }
    [quads(p0, p1), quads(p2, p3)]
}

/// One super-block times one Q8_K block into `acc`; `chunk(c)` gives chunk c's quants and its
/// scale (in all eight i16 lanes).
#[inline(always)]
fn step_k<const U7: bool>(
    chunk: impl Fn(usize) -> (v128, v128),
    h: &KHeader,
    y: &BlockQ8K,
    acc: &mut Acc,
) {
    let mut lanes = k_lanes::<U7>(chunk, i8_bytes(&y.qs));
    match h.extra {
        KExtra::None | KExtra::Q6Offset { .. } => {}
        KExtra::Q2Mins { mins, dmin } => {
            let b = bytemuck::cast_slice::<i16, u8>(&y.bsums);
            let lanes = [
                i32x4_dot_i16x8(mins[0], load16(b, 0)),
                i32x4_dot_i16x8(mins[1], load16(b, 16)),
            ];
            acc.fma(-y.d * dmin, lanes);
        }
        KExtra::Q4Mins { mins, dmin } => {
            acc.m4 = fma4(-y.d * dmin, k4_min_lanes(mins, y), acc.m4);
        }
        KExtra::Q5Mins { mins, dmin } => {
            let p = k4_min_lanes(mins, y);
            let p = i32x4_add(p, u64x2_shuffle::<1, 1>(p, p));
            let isum = i32x4_extract_lane::<0>(p).wrapping_add(i32x4_extract_lane::<1>(p));
            acc.summs = fma_scalar(-y.d * dmin, isum as f32, acc.summs);
        }
    }
    if let KExtra::Q6Offset { scales } = h.extra {
        let b = bytemuck::cast_slice::<i16, u8>(&y.bsums);
        for (k, lane) in lanes.iter_mut().enumerate() {
            let off = i32x4_dot_i16x8(load16(b, 16 * k), scales[k]);
            *lane = i32x4_sub(*lane, i32x4_shl(off, 5));
        }
    }
    acc.fma(y.d * h.d, lanes);
}

/// A super-block decoded once for all the activation rows it meets: its chunks' quants, their
/// scales in all eight i16 lanes, and its header.
struct KDecoded {
    q: [v128; 16],
    scales: [v128; 16],
    h: KHeader,
}

#[inline(always)]
fn decode_k<W: KQuant>(x: &W) -> KDecoded {
    let h = x.header();
    KDecoded {
        q: std::array::from_fn(|c| x.chunk(c)),
        scales: std::array::from_fn(|c| i16x8_splat(h.scales[c])),
        h,
    }
}

/// A gemm's weight blocks decoded once for the whole call (`nb` per row, row after row) when
/// at least two groups of four activation rows follow, each reading them again; `None` for
/// fewer, where a decoded copy of every row (up to 256 per call for small verify batches) would
/// only be written and read back once, so the caller decodes as it goes.
fn decode_rows_once<B, D>(
    w: &[B],
    n_rows: usize,
    nb: usize,
    n_acts: usize,
    decode: impl Fn(&B) -> D,
) -> Option<Vec<D>> {
    if n_acts < 8 {
        return None;
    }
    let wb = w.len() / n_rows;
    Some(
        (0..n_rows)
            .flat_map(|r| w[r * wb..r * wb + nb].iter().map(&decode))
            .collect(),
    )
}

/// A K-quant's x4 kernel: one weight row against four activation rows.
type KX4<W> = fn(usize, &[W], [&[BlockQ8K]; 4]) -> [f32; 4];

/// Weight rows × activation rows (`out[t * n_rows + r]`, each bit-identical to `single`),
/// each weight row against four activation rows per pass (`x4`), the rows left over through
/// `single`. With at least two passes per weight row, every super-block is decoded once per
/// call instead ([`decode_rows_once`], [`KDecoded`]: unpacking the quants and the scales costs
/// about as much as its multiply-adds with four activation rows).
#[allow(clippy::too_many_arguments)]
fn gemm_k<W: KQuant, const U7: bool>(
    single: fn(usize, &[W], &[BlockQ8K]) -> f32,
    x4: KX4<W>,
    n: usize,
    w: &[W],
    n_rows: usize,
    a: &[BlockQ8K],
    n_acts: usize,
    out: &mut [f32],
) {
    if n_rows == 0 || n_acts == 0 {
        return;
    }
    let (wb, ab) = (w.len() / n_rows, a.len() / n_acts);
    let row = |r: usize| &w[r * wb..(r + 1) * wb];
    let act = |t: usize| &a[t * ab..(t + 1) * ab];
    let nb = block_count(n, QK_K, wb, ab);
    let full = n_acts / 4 * 4;
    let decoded = decode_rows_once(w, n_rows, nb, n_acts, decode_k::<W>);
    for t in (0..full).step_by(4) {
        let ys = [act(t), act(t + 1), act(t + 2), act(t + 3)];
        for r in 0..n_rows {
            let Some(decoded) = &decoded else {
                for (j, v) in x4(n, row(r), ys).into_iter().enumerate() {
                    out[(t + j) * n_rows + r] = v;
                }
                continue;
            };
            let mut acc = [Acc::new(); 4];
            for (i, d) in decoded[r * nb..(r + 1) * nb].iter().enumerate() {
                for (j, acc) in acc.iter_mut().enumerate() {
                    step_k::<U7>(|c| (d.q[c], d.scales[c]), &d.h, &ys[j][i], acc);
                }
            }
            for (j, acc) in acc.into_iter().enumerate() {
                out[(t + j) * n_rows + r] = W::finish(acc);
            }
        }
    }
    for t in full..n_acts {
        for r in 0..n_rows {
            out[t * n_rows + r] = single(n, row(r), act(t));
        }
    }
}

/// Generates a K-quant's single-row kernel (unpacking as it multiplies), x4 kernel (unpacking
/// once per super-block) and gemm ([`gemm_k`]); the float operations per row are the same.
macro_rules! k_kernels {
    ($single:ident, $x4:ident, $gemm:ident, $W:ty) => {
        pub fn $single(n: usize, x: &[$W], y: &[BlockQ8K]) -> f32 {
            let nb = block_count(n, QK_K, x.len(), y.len());
            let mut acc = Acc::new();
            for (x, y) in x[..nb].iter().zip(&y[..nb]) {
                let h = x.header();
                let chunk = |c: usize| (x.chunk(c), i16x8_splat(h.scales[c]));
                step_k::<{ <$W as KQuant>::U7 }>(chunk, &h, y, &mut acc);
            }
            <$W as KQuant>::finish(acc)
        }

        /// One weight row against four activation rows; each result is bit-identical to the
        /// single-row kernel's.
        pub fn $x4(n: usize, x: &[$W], ys: [&[BlockQ8K]; 4]) -> [f32; 4] {
            let min_act = ys.iter().map(|y| y.len()).min().unwrap_or(0);
            let nb = block_count(n, QK_K, x.len(), min_act);
            let mut acc = [Acc::new(); 4];
            for i in 0..nb {
                let d = decode_k(&x[i]);
                for r in 0..4 {
                    step_k::<{ <$W as KQuant>::U7 }>(
                        |c| (d.q[c], d.scales[c]),
                        &d.h,
                        &ys[r][i],
                        &mut acc[r],
                    );
                }
            }
            acc.map(<$W as KQuant>::finish)
        }

        /// `n_rows` weight rows × `n_acts` activation rows ([`gemm_k`]).
        pub fn $gemm(
            n: usize,
            w: &[$W],
            n_rows: usize,
            a: &[BlockQ8K],
            n_acts: usize,
            out: &mut [f32],
        ) {
            gemm_k::<$W, { <$W as KQuant>::U7 }>($single, $x4, n, w, n_rows, a, n_acts, out)
        }
    };
}

impl KQuant for BlockQ2K {
    const U7: bool = true;
    fn header(&self) -> KHeader {
        let mins = byte_bits(load16(&self.scales, 0), 4, 0x0F);
        KHeader {
            scales: std::array::from_fn(|c| (self.scales[c] & 0x0F) as i16),
            d: self.d.to_f32(),
            extra: KExtra::Q2Mins {
                mins: [u16x8_extend_low_u8x16(mins), u16x8_extend_high_u8x16(mins)],
                dmin: self.dmin.to_f32(),
            },
        }
    }

    /// Element i = 128j + 32g + b: bits 2g..2g+2 of qs[32j + b]; chunk c = 8j + 2g + b/16.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let (j, g, b0) = (c / 8, (c % 8) / 2, 16 * (c % 2));
        let raw = load16(&self.qs, 32 * j + b0);
        byte_bits(raw, 2 * g as u32, 3)
    }
}

impl KQuant for BlockQ3K {
    const U7: bool = false;
    fn header(&self) -> KHeader {
        let s = super::scalar::unpack_scales_q3k(&self.scales);
        KHeader {
            scales: s.map(|v| v as i16),
            d: self.d.to_f32(),
            extra: KExtra::None,
        }
    }

    /// Element i = 32g + b: bits 2(g%4).. of qs[32(g/4) + b], minus 4 where bit g of hmask[b]
    /// is clear.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let (g, b0) = (c / 2, 16 * (c % 2));
        let raw = load16(&self.qs, 32 * (g / 4) + b0);
        let low = byte_bits(raw, 2 * (g % 4) as u32, 3);
        let high = byte_bits(load16(&self.hmask, b0), g as u32, 1);
        let minus4 = i8x16_shl(v128_xor(high, u8x16_splat(1)), 2);
        i8x16_sub(low, minus4)
    }
}

/// Q4_K / Q5_K header: scales per 32 elements, the 8 mins as i16x8.
#[inline(always)]
fn k4_header(packed: &[u8; 12], d: f32, dmin: f32, q5: bool) -> KHeader {
    let (sc, mn) = super::scalar::unpack_scales_mins_k4(packed);
    let mins = u16x8(
        mn[0] as u16,
        mn[1] as u16,
        mn[2] as u16,
        mn[3] as u16,
        mn[4] as u16,
        mn[5] as u16,
        mn[6] as u16,
        mn[7] as u16,
    );
    KHeader {
        scales: std::array::from_fn(|c| sc[c / 2] as i16),
        d,
        extra: if q5 {
            KExtra::Q5Mins { mins, dmin }
        } else {
            KExtra::Q4Mins { mins, dmin }
        },
    }
}

/// Q4_K / Q5_K nibbles of chunk c: element i = 64cc + 32k + b is nibble k of qs[32cc + b].
#[inline(always)]
fn k4_nibbles(qs: &[u8; QK_K / 2], c: usize) -> v128 {
    let g = c / 2;
    let raw = load16(qs, 32 * (g / 2) + 16 * (c % 2));
    if g & 1 == 0 {
        v128_and(raw, u8x16_splat(0x0F))
    } else {
        byte_bits(raw, 4, 0x0F)
    }
}

impl KQuant for BlockQ4K {
    const U7: bool = true;
    fn header(&self) -> KHeader {
        k4_header(&self.scales, self.d.to_f32(), self.dmin.to_f32(), false)
    }

    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        k4_nibbles(&self.qs, c)
    }

    fn finish(acc: Acc) -> f32 {
        acc.finish_m4()
    }
}

impl KQuant for BlockQ5K {
    const U7: bool = true;
    fn header(&self) -> KHeader {
        k4_header(&self.scales, self.d.to_f32(), self.dmin.to_f32(), true)
    }

    /// The nibble plus the 5th bit: bit g of qh[b] for element 32g + b.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let qh = load16(&self.qh, 16 * (c % 2));
        let bit = byte_bits(qh, (c / 2) as u32, 1);
        v128_or(k4_nibbles(&self.qs, c), i8x16_shl(bit, 4))
    }

    fn finish(acc: Acc) -> f32 {
        acc.finish_summs()
    }
}

impl KQuant for BlockQ6K {
    // The quants stay unsigned (0..64; the -32 comes from the bsums), so 7-bit.
    const U7: bool = true;
    fn header(&self) -> KHeader {
        let sc = load16(bytemuck::cast_slice::<i8, u8>(&self.scales), 0);
        KHeader {
            scales: self.scales.map(|v| v as i16),
            d: self.d.to_f32(),
            extra: KExtra::Q6Offset {
                scales: [i16x8_extend_low_i8x16(sc), i16x8_extend_high_i8x16(sc)],
            },
        }
    }

    /// Element i = 128h + 32g + l: nibble g/2 of ql[64h + 32(g%2) + l], bits 2g..2g+2 of
    /// qh[32h + l] above it (unsigned, 0..64: the -32 comes from the bsums in `step_k`);
    /// chunk c = 8h + 2g + l/16.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let (h, g, l0) = (c / 8, (c % 8) / 2, 16 * (c % 2));
        let ql = load16(&self.ql, 64 * h + 32 * (g % 2) + l0);
        let low = if g < 2 {
            v128_and(ql, u8x16_splat(0x0F))
        } else {
            byte_bits(ql, 4, 0x0F)
        };
        let qh = load16(&self.qh, 32 * h + l0);
        let high = byte_bits(qh, 2 * g as u32, 3);
        v128_or(low, i8x16_shl(high, 4))
    }
}

k_kernels!(
    vec_dot_q2_k_q8_k,
    vec_dot_q2_k_q8_k_x4,
    gemm_q2_k_q8_k,
    BlockQ2K
);
k_kernels!(
    vec_dot_q3_k_q8_k,
    vec_dot_q3_k_q8_k_x4,
    gemm_q3_k_q8_k,
    BlockQ3K
);
k_kernels!(
    vec_dot_q4_k_q8_k,
    vec_dot_q4_k_q8_k_x4,
    gemm_q4_k_q8_k,
    BlockQ4K
);
k_kernels!(
    vec_dot_q5_k_q8_k,
    vec_dot_q5_k_q8_k_x4,
    gemm_q5_k_q8_k,
    BlockQ5K
);
k_kernels!(
    vec_dot_q6_k_q8_k,
    vec_dot_q6_k_q8_k_x4,
    gemm_q6_k_q8_k,
    BlockQ6K
);

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn lanes(v: v128) -> [f32; 4] {
        [
            f32x4_extract_lane::<0>(v),
            f32x4_extract_lane::<1>(v),
            f32x4_extract_lane::<2>(v),
            f32x4_extract_lane::<3>(v),
        ]
    }

    fn check(d: f32, sums: [i32; 4], acc: [f32; 4]) -> usize {
        let got = lanes(fma4(
            d,
            i32x4(sums[0], sums[1], sums[2], sums[3]),
            f32x4(acc[0], acc[1], acc[2], acc[3]),
        ));
        let mut midpoints = 0;
        for l in 0..4 {
            let want = d.mul_add(sums[l] as f32, acc[l]);
            assert_eq!(
                got[l].to_bits(),
                want.to_bits(),
                "fmaf({d:e}, {}, {:e}) lane {l}",
                sums[l],
                acc[l]
            );
            let r = d as f64 * sums[l] as f32 as f64 + acc[l] as f64;
            midpoints += (r.to_bits() & BELOW_F32_MANTISSA == F32_MIDPOINT_BITS) as usize;
        }
        midpoints
    }

    /// d · s = 0.5 - k² 2^-47 with s = 2^23 + k, d = (2^23 - k) 2^-47, added to integers c in
    /// [2^23, 2^24) (f32 ulp 1): the f64 sum is exactly the midpoint c ± 0.5 while the exact
    /// value lies just inside (or, k = 0, on) it: plain f64 rounding gets half of these wrong.
    #[test]
    fn fma4_rounds_f64_midpoints_like_fmaf() {
        let mut midpoints = 0;
        for k in 0..6i32 {
            let s = (1 << 23) + k;
            let d = ((1 << 23) - k) as f32 * 2f32.powi(-47);
            for c in (0..2000).map(|i| ((1 << 23) + 4099 * i) as f32) {
                midpoints += check(d, [s, s, -s, -s], [c, -c, c + 1.0, -(c + 1.0)]);
            }
        }
        assert!(midpoints > 40_000, "only {midpoints} midpoints");
    }

    #[test]
    fn fma4_edge_values_like_fmaf() {
        let vals = [
            0.0,
            -0.0,
            1.0e-40,
            -3.0e-39,
            f32::MIN_POSITIVE,
            1.5,
            -7.0e30,
            f32::MAX,
        ];
        for d in vals {
            for acc in vals {
                check(d, [0, 1, -1, 1 << 24], [acc, -acc, acc, acc]);
                check(d, [i32::MAX, i32::MIN, 3, -5], [acc, acc, -acc, 0.0]);
            }
        }
    }
}
