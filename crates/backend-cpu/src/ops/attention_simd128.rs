//! wasm32 SIMD128 versions of the attention inner loops (`attention::dot_block`, `scale_acc`,
//! `mad_rows`, the K/V row widening and the query rounding), bit-identical to the scalar ones,
//! as `attention_avx2` is on x86: the f16 arithmetic of the reference build's 128-element steps
//! (`f16_arith`: fused multiply-adds rounded once to f16, with a fast path and an exact one),
//! the scalar leftovers' in-order f64 sums, and the scalar loops' f32 fused multiply-add
//! (`fmaf`, then f16: wasm's `f32::mul_add` is a slow software `fmaf`). Rounding to f16
//! precision is f32 arithmetic (`half` converts in software on wasm). Checked against the
//! scalar code by the tests here and in `attention.rs` (run in Node).

#![cfg(all(target_arch = "wasm32", target_feature = "simd128"))]

use core::arch::wasm32::*;
use tessera_quant::isa::{Simd, Simd128};

/// [`Simd::round_f16`] of SIMD128 (software rounding: wasm has no f16 instructions).
#[inline(always)]
fn round_f16(x: v128) -> v128 {
    Simd128.round_f16(x)
}

/// `acc = f16(fma(v, vs, acc))` over the leading multiple of 4 elements of
/// `min(acc.len(), v.len())`; returns how many were done. `v` holds f16-exact values. (Four
/// vectors per iteration: V8 checks for interrupts at every loop back edge, which costs about
/// as much as one vector's work.)
pub fn mad_f16(acc: &mut [f32], v: &[f32], vs: f32) -> usize {
    let n = acc.len().min(v.len()) / 4 * 4;
    let n16 = n / 16 * 16;
    let s = f32x4_splat(vs);
    // A factor of 1 (each new running maximum) or 0 leaves the product exact in f32.
    let exact_product = vs == 1.0 || vs == 0.0;
    let (ap, vp) = (acc.as_mut_ptr(), v.as_ptr());
    // SAFETY (all calls): i + 16 <= n16 <= n, and then i + 4 <= n; n <= acc.len(), v.len().
    for i in (0..n16).step_by(16) {
        unsafe {
            mad_f16x4(ap.add(i), vp.add(i), s, exact_product);
            mad_f16x4(ap.add(i + 4), vp.add(i + 4), s, exact_product);
            mad_f16x4(ap.add(i + 8), vp.add(i + 8), s, exact_product);
            mad_f16x4(ap.add(i + 12), vp.add(i + 12), s, exact_product);
        }
    }
    for i in (n16..n).step_by(4) {
        unsafe { mad_f16x4(ap.add(i), vp.add(i), s, exact_product) };
    }
    n
}

/// `*a = f16(fma(*v, s, *a))` for 4 lanes ([`fma_round_f16`]).
///
/// # Safety
/// `a` and `v` must point to 4 f32 each (unaligned is fine).
#[inline(always)]
unsafe fn mad_f16x4(a: *mut f32, v: *const f32, s: v128, exact_product: bool) {
    let p = a as *mut v128;
    v128_store(p, fma_round_f16(load(v, 0), s, v128_load(p), exact_product));
}

/// `f16(fmaf(x, s, a))` (the fused multiply-add rounded to f32, then to f16) for 4 lanes;
/// `exact_product` may be set where `x*s` is exact in f32: then `fmaf` is the f32 sum.
#[inline(always)]
fn fma_round_f16(x: v128, s: v128, a: v128, exact_product: bool) -> v128 {
    if exact_product {
        return round_f16(f32x4_add(f32x4_mul(x, s), a));
    }
    // The relaxed-SIMD build: one fused multiply-add (see quant's fma_f32x4).
    #[cfg(target_feature = "relaxed-simd")]
    return round_f16(tessera_quant::vec_dot::fma_f32x4(x, s, a));
    // Plain SIMD128: `r = x*s + a` in f64 (the product is exact there), one f64 rounding.
    // Its demotion to f32 is `fmaf`'s rounding unless `r` is an f32 midpoint (if the two
    // roundings differed, an f32 midpoint would lie between the exact sum and `r`, inclusive;
    // it is an f64, and `r` is the f64 nearest the exact sum, so it is `r`). A midpoint (f32
    // subnormal ones and the overflow threshold included) has at most 25 significant bits:
    // its low 28 f64 mantissa bits are zero. Lanes like that (also exact zeros, rare) go to
    // quant's exact `fma_f32x4`, which needs those checks only because its result is final.
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        let wide = |v: v128| {
            (
                f64x2_promote_low_f32x4(v),
                f64x2_promote_low_f32x4(u64x2_shuffle::<1, 1>(v, v)),
            )
        };
        let ((x0, x1), (s0, s1), (a0, a1)) = (wide(x), wide(s), wide(a));
        let r0 = f64x2_add(f64x2_mul(x0, s0), a0);
        let r1 = f64x2_add(f64x2_mul(x1, s1), a1);
        let suspect = v128_or(
            i64x2_eq(i64x2_shl(r0, 36), i64x2_splat(0)),
            i64x2_eq(i64x2_shl(r1, 36), i64x2_splat(0)),
        );
        if v128_any_true(suspect) {
            return round_f16(tessera_quant::vec_dot::fma_f32x4(x, s, a));
        }
        round_f16(u64x2_shuffle::<0, 2>(
            f32x4_demote_f64x2_zero(r0),
            f32x4_demote_f64x2_zero(r1),
        ))
    }
}

/// Elements of one step of the reference build's f16 loops (4 registers × 32 halves): 32
/// f32x4 registers here.
const STEP: usize = super::f16_arith::STEP;
const REGS: usize = STEP / 4;

#[inline(always)]
fn zero() -> v128 {
    f32x4_splat(0.0)
}

/// 4 lanes of [`f16_arith::fma_f16`](super::f16_arith::fma_f16): `f16(a*b + c)` rounded once,
/// a, b, c f16-exact — unless a lane of the returned mark is zero: then the lanes must be redone
/// with [`fma_f16x4_exact`]. Marks of several calls combine with [`combine_marks`].
///
/// Fast path (as `attention_avx2::fma_f16x8_fast`): `a*b` is exact in f32 (22 significant
/// bits, exponent ≥ -48), so `s = f32(a*b + c)` is the one-rounded f32 fused multiply-add, no
/// fused instruction needed. `s` rounded to f16 is the once-rounded result unless `s` is an f16
/// midpoint: if the exact sum and `s` rounded to different f16 values, an f16 midpoint `m`
/// would lie between them (inclusive); `m` is an f32 and `s` the f32 nearest the exact sum, so
/// `m` can only be `s`. A midpoint has at most 12 significant bits, so its low 12 f32 mantissa
/// bits are zero; the mark is those bits (shifted to the top): zero for every midpoint (and,
/// harmlessly, where `s` is an f16 already, infinite or NaN).
#[inline(always)]
fn fma_f16x4_fast(a: v128, b: v128, c: v128) -> (v128, v128) {
    let s = f32x4_add(f32x4_mul(a, b), c);
    (round_f16(s), i32x4_shl(s, 20))
}

/// Two marks of [`fma_f16x4_fast`] combined: a lane is zero where either is.
#[inline(always)]
fn combine_marks(a: v128, b: v128) -> v128 {
    u32x4_min(a, b)
}

/// Whether combined marks ask for the exact path in some lane.
#[inline(always)]
fn any_marked(marks: v128) -> bool {
    !i32x4_all_true(marks)
}

/// [`fma_f16x4_fast`] for any lanes: the scalar emulation's TwoSum, rounding to odd and
/// conversion, lane-wise.
#[inline(always)]
fn fma_f16x4_exact(a: v128, b: v128, c: v128) -> v128 {
    let p = f32x4_mul(a, b); // exact
    let s = f32x4_add(p, c);
    let bb = f32x4_sub(s, p);
    let e = f32x4_add(f32x4_sub(p, f32x4_sub(s, bb)), f32x4_sub(c, bb));
    // Round to odd: where inexact, finite and even, step one ulp towards e.
    let one = u32x4_splat(1);
    let inexact = f32x4_ne(e, zero());
    let even = i32x4_eq(v128_and(s, one), u32x4_splat(0));
    let finite = f32x4_lt(f32x4_abs(s), f32x4_splat(f32::INFINITY));
    let mask = v128_and(inexact, v128_and(even, finite));
    // +1 (away from zero) when e has the sign of s, else -1.
    let step = v128_or(i32x4_shr(v128_xor(s, e), 31), one);
    round_f16(i32x4_add(s, v128_and(step, mask)))
}

/// `f16(a + b)` for f16-exact lanes, rounded once: the f32 sum rounded to f16 is always that
/// (`attention_avx2::add_f16x8` has the proof: where the f32 sum is inexact, the smaller
/// operand is below a quarter of the distance from the larger one to its nearest f16 midpoint).
#[inline(always)]
fn add_f16x4(a: v128, b: v128) -> v128 {
    round_f16(f32x4_add(a, b))
}

/// `v128_load` of 4 f32 from `p + i`.
///
/// # Safety
/// `p + i .. p + i + 4` must be readable.
#[inline(always)]
unsafe fn load(p: *const f32, i: usize) -> v128 {
    v128_load(p.add(i) as *const v128)
}

/// [`f16_arith::dot_steps`](super::f16_arith::dot_steps) (the f16 arithmetic of an
/// AVX512-FP16 build), bit for bit, for four keys against one query: `k[b]` and `q` hold
/// f16-exact values, all of one length, a multiple of 128.
///
/// Each of the 128 accumulator lanes only ever meets the same lane of later steps, so the
/// loops go register by register: a register's 4 keys' accumulators stay in locals through all
/// the steps, and the exact path, when a mark asks for it, redoes only that register.
pub fn dot_f16_steps_x4(k: [&[f32]; 4], q: &[f32]) -> [f32; 4] {
    let n = q.len();
    assert!(n % STEP == 0 && n > 0 && k.iter().all(|k| k.len() == n));
    let (kp, qp) = (k.map(|k| k.as_ptr()), q.as_ptr());
    // regs[r][b]: lanes 4r..4r+4 of key b's 128 (the reference's register R of 32 halves is
    // regs[8R..8R+8][b]).
    let regs: [[v128; 4]; REGS] = std::array::from_fn(|r| {
        // SAFETY (every load): i + 4r + 4 <= n, the length of q and of each k[b].
        // The first step adds to +0 (a -0 product gives +0, as there); the product is exact,
        // so that is one rounding.
        let qv = unsafe { load(qp, 4 * r) };
        let mut a: [v128; 4] = std::array::from_fn(|b| {
            round_f16(f32x4_add(
                f32x4_mul(unsafe { load(kp[b], 4 * r) }, qv),
                zero(),
            ))
        });
        for i in (STEP..n).step_by(STEP) {
            let qv = unsafe { load(qp, i + 4 * r) };
            let kv: [v128; 4] = std::array::from_fn(|b| unsafe { load(kp[b], i + 4 * r) });
            let fast: [(v128, v128); 4] = std::array::from_fn(|b| fma_f16x4_fast(kv[b], qv, a[b]));
            let marks = combine_marks(
                combine_marks(fast[0].1, fast[1].1),
                combine_marks(fast[2].1, fast[3].1),
            );
            a = if any_marked(marks) {
                std::array::from_fn(|b| fma_f16x4_exact(kv[b], qv, a[b]))
            } else {
                fast.map(|f| f.0)
            };
        }
        a
    });
    let z: [v128; 4] =
        std::array::from_fn(|b| reduce_to_4_lanes(&std::array::from_fn(|r| regs[r][b])));
    // Then `_mm512_reduce_add_ph`'s lanes i + i+2 and i + i+1, two and four keys per register:
    // [z0 lo | z1 lo] + [z0 hi | z1 hi] = [a0 a1 b0 b1] (a, b: keys 0, 1; c, d: keys 2, 3).
    let ab = add_f16x4(
        i32x4_shuffle::<0, 1, 4, 5>(z[0], z[1]),
        i32x4_shuffle::<2, 3, 6, 7>(z[0], z[1]),
    );
    let cd = add_f16x4(
        i32x4_shuffle::<0, 1, 4, 5>(z[2], z[3]),
        i32x4_shuffle::<2, 3, 6, 7>(z[2], z[3]),
    );
    // [a0 b0 c0 d0] + [a1 b1 c1 d1] (f16 addition is commutative, signed zeros included).
    let t = add_f16x4(
        i32x4_shuffle::<0, 2, 4, 6>(ab, cd),
        i32x4_shuffle::<1, 3, 5, 7>(ab, cd),
    );
    [
        f32x4_extract_lane::<0>(t),
        f32x4_extract_lane::<1>(t),
        f32x4_extract_lane::<2>(t),
        f32x4_extract_lane::<3>(t),
    ]
}

/// One key's 32 accumulator registers summed (in f16) down to 4 lanes, in
/// [`f16_arith::reduce`](super::f16_arith::reduce)'s order: lanes `l + 64`, then `l + 32` and
/// `l + 96` (x0 += x2, x1 += x3, x0 += x1 over registers of 32 halves), then the halvings
/// i + i+16, i + i+8, i + i+4.
#[inline(always)]
fn reduce_to_4_lanes(a: &[v128; REGS]) -> v128 {
    let x: [v128; 8] = std::array::from_fn(|j| {
        add_f16x4(add_f16x4(a[j], a[16 + j]), add_f16x4(a[8 + j], a[24 + j]))
    });
    let x: [v128; 4] = std::array::from_fn(|j| add_f16x4(x[j], x[j + 4]));
    add_f16x4(add_f16x4(x[0], x[2]), add_f16x4(x[1], x[3]))
}

/// Elements per block of [`mad_f16_steps`]: the unit that the exact path redoes.
const MAD_BLOCK: usize = 32;

/// [`f16_arith::mad_steps`](super::f16_arith::mad_steps) for `N` rows that share one V row:
/// `y[h] = f16(x·f16(v[h]) + y[h])` (one rounding) over `min` of the lengths, which must be a
/// multiple of 32; `x` f16-exact. Each block of `x` is loaded once for all the rows.
pub fn mad_f16_steps<const N: usize>(y: [&mut [f32]; N], x: &[f32], v: [f32; N]) {
    let n = x.len().min(y.iter().map(|y| y.len()).min().unwrap_or(0));
    assert!(n % MAD_BLOCK == 0);
    let vv = v.map(|v| round_f16(f32x4_splat(v)));
    // A factor of 1 (each new running maximum) or 0 (an underflowed weight) makes the fast
    // path exact — the f32 sum of two f16 rounded to f16 is the once-rounded sum (see
    // [`add_f16x4`]), and `0·x + y` is `y` — so those rows never take the exact path (for a
    // factor of 1 the mark would fire on about half the blocks).
    let check = vv.map(|v| {
        let v = f32x4_extract_lane::<0>(v);
        v != 1.0 && v != 0.0
    });
    let yp = y.map(|y| y.as_mut_ptr());
    let xp = x.as_ptr();
    for i in (0..n).step_by(MAD_BLOCK) {
        // SAFETY (all loads and stores): i + 4r + 4 <= n, within x and every y[h].
        let xv: [v128; MAD_BLOCK / 4] = std::array::from_fn(|r| unsafe { load(xp, i + 4 * r) });
        for h in 0..N {
            let mut out = [zero(); MAD_BLOCK / 4];
            let mut marks = u32x4_splat(u32::MAX);
            for (r, o) in out.iter_mut().enumerate() {
                let (s, m) = fma_f16x4_fast(xv[r], vv[h], unsafe { load(yp[h], i + 4 * r) });
                *o = s;
                marks = combine_marks(marks, m);
            }
            if check[h] && any_marked(marks) {
                for (r, o) in out.iter_mut().enumerate() {
                    *o = fma_f16x4_exact(xv[r], vv[h], unsafe { load(yp[h], i + 4 * r) });
                }
            }
            for (r, o) in out.iter().enumerate() {
                unsafe { v128_store(yp[h].add(i + 4 * r) as *mut v128, *o) };
            }
        }
    }
}

/// `attention::head_plus_leftovers(init[b], k[b], q)` for four keys: each key's exact f32
/// products added to its f64 sum one by one in element order, the same operations in the same
/// order as the scalar loop (so the same bits, whatever the values), with the four keys' sums
/// in the two lanes of two f64x2 registers. `q.len() % 4 == 0`, every `k[b]` as long.
pub fn head_plus_leftovers_x4(init: [f64; 4], k: [&[f32]; 4], q: &[f32]) -> [f32; 4] {
    let n = q.len();
    assert!(n % 4 == 0 && k.iter().all(|k| k.len() == n));
    let (kp, qp) = (k.map(|k| k.as_ptr()), q.as_ptr());
    let mut s01 = f64x2(init[0], init[1]);
    let mut s23 = f64x2(init[2], init[3]);
    for i in (0..n).step_by(4) {
        // SAFETY: i + 4 <= n, the length of q and of each k[b].
        let qv = unsafe { load(qp, i) };
        let p: [v128; 4] = std::array::from_fn(|b| f32x4_mul(unsafe { load(kp[b], i) }, qv));
        // Element j of keys 0 and 1 (2 and 3) into the low two lanes, widened to f64, added.
        macro_rules! add_element {
            ($j:literal, $j4:literal) => {
                let e01 = i32x4_shuffle::<$j, $j4, $j, $j4>(p[0], p[1]);
                let e23 = i32x4_shuffle::<$j, $j4, $j, $j4>(p[2], p[3]);
                s01 = f64x2_add(s01, f64x2_promote_low_f32x4(e01));
                s23 = f64x2_add(s23, f64x2_promote_low_f32x4(e23));
            };
        }
        add_element!(0, 4);
        add_element!(1, 5);
        add_element!(2, 6);
        add_element!(3, 7);
    }
    [
        f64x2_extract_lane::<0>(s01) as f32,
        f64x2_extract_lane::<1>(s01) as f32,
        f64x2_extract_lane::<0>(s23) as f32,
        f64x2_extract_lane::<1>(s23) as f32,
    ]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use half::f16;
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use crate::ops::test_rng::next;

    fn same(got: f32, want: f32) -> bool {
        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
    }

    /// Rounding to f16 against `half` on random f32 bit patterns, on f32 values near every
    /// f16 rounding boundary (midpoints ± 1 ulp), and on the range edges.
    #[test]
    fn rounding_to_f16_matches_half() {
        let mut xs: Vec<f32> = vec![
            0.0,
            -0.0,
            65504.0,
            65519.996,
            65520.0,
            -65520.0,
            1.0e6,
            6.1e-5,
            f32::MIN_POSITIVE,
            1.0e-45,
            2f32.powi(-25),
            3.0 * 2f32.powi(-26),
            f32::MAX,
            // Around the clamp of round_f16's added constant (2^16), and beyond.
            65536.0,
            -65536.0,
            65537.0,
            65535.0,
            -131071.0,
            1.5 * 2f32.powi(29),
            -1.5 * 2f32.powi(29),
            -0.0,
            -1.0e-30,
            -2f32.powi(-25),
            -3.0 * 2f32.powi(-26),
            2f32.powi(114) * 1.75,
            2f32.powi(115),
            2f32.powi(116) * 1.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0x7fff_ffff),
            f32::from_bits(0xffc0_1fff),
            // f32 subnormals and the f16 normal/subnormal boundary.
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f16::MIN_POSITIVE.to_f32() * (1.0 - f32::EPSILON),
            65519.0,
            -65519.996,
        ];
        // Every f16 value rounds to itself.
        for h in 0..0x7c00u16 {
            xs.push(f16::from_bits(h).to_f32());
        }
        let mut s = 7;
        for _ in 0..100_000 {
            xs.push(f32::from_bits(next(&mut s) as u32));
        }
        for h in 0..0x7c00u16 {
            // The midpoint between f16 h and h + 1, and its f32 neighbours.
            let mid =
                (f16::from_bits(h).to_f32() as f64 + f16::from_bits(h + 1).to_f32() as f64) / 2.0;
            let m = mid as f32;
            for x in [
                m,
                f32::from_bits(m.to_bits() + 1),
                f32::from_bits(m.to_bits() - 1),
            ] {
                xs.push(x);
                xs.push(-x);
            }
        }
        for c in xs.chunks_exact(4) {
            let got = round_f16(f32x4(c[0], c[1], c[2], c[3]));
            let got = [
                f32x4_extract_lane::<0>(got),
                f32x4_extract_lane::<1>(got),
                f32x4_extract_lane::<2>(got),
                f32x4_extract_lane::<3>(got),
            ];
            for (g, &x) in got.iter().zip(c) {
                let want = f16::from_f32(x).to_f32();
                assert!(same(*g, want), "{x:e}: {g:e} vs {want:e}");
            }
        }
    }

    use super::super::attention::head_plus_leftovers;
    use super::super::f16_arith;
    use super::super::f16_arith::tests::Rng;

    fn lanes(v: v128) -> [f32; 4] {
        [
            f32x4_extract_lane::<0>(v),
            f32x4_extract_lane::<1>(v),
            f32x4_extract_lane::<2>(v),
            f32x4_extract_lane::<3>(v),
        ]
    }

    fn splat4(x: [f32; 4]) -> v128 {
        f32x4(x[0], x[1], x[2], x[3])
    }

    /// One fused multiply-add as the kernels do it: the fast path, redone exactly if marked.
    fn fma_f16x4(a: v128, b: v128, c: v128) -> v128 {
        let (r, marks) = fma_f16x4_fast(a, b, c);
        if any_marked(marks) {
            fma_f16x4_exact(a, b, c)
        } else {
            r
        }
    }

    #[test]
    fn simd128_fma_and_add_lanes_equal_the_scalar_emulation() {
        let mut rng = Rng(0xdead_beef_1234_5678);
        let (mut marked, mut fast_taken) = (0, 0);
        for case in 0..100_000 {
            let v: [[f32; 4]; 3] =
                std::array::from_fn(|_| std::array::from_fn(|_| rng.f16().to_f32()));
            let (a, b, c) = (splat4(v[0]), splat4(v[1]), splat4(v[2]));
            if any_marked(fma_f16x4_fast(a, b, c).1) {
                marked += 1;
            } else {
                fast_taken += 1;
            }
            let (got, exact) = (lanes(fma_f16x4(a, b, c)), lanes(fma_f16x4_exact(a, b, c)));
            // Same-binade operands for the adds: the sums that cancel or need 12 bits.
            let d: [f32; 4] = std::array::from_fn(|l| match case % 2 {
                0 => v[2][l],
                _ => f16::from_bits(
                    rng.f16().to_bits() & 0x83ff | f16::from_f32(v[0][l]).to_bits() & 0x7c00,
                )
                .to_f32(),
            });
            let sum = lanes(add_f16x4(a, splat4(d)));
            for l in 0..4 {
                let want = f16_arith::fma_f16(v[0][l], v[1][l], v[2][l]);
                let abc = (v[0][l], v[1][l], v[2][l]);
                assert!(same(got[l], want), "fma {abc:?}: {} vs {want}", got[l]);
                assert!(
                    same(exact[l], want),
                    "exact fma {abc:?}: {} vs {want}",
                    exact[l]
                );
                let want = f16_arith::add_f16(v[0][l], d[l]);
                assert!(
                    same(sum[l], want),
                    "{} + {}: {} vs {want}",
                    v[0][l],
                    d[l],
                    sum[l]
                );
            }
        }
        assert!(marked > 100 && fast_taken > 50_000, "{marked} {fast_taken}");
        // Overflow and a tie at the top: 65504 + 16 rounds (ties to even) to infinity.
        for (a, b, c, want) in [
            (65504.0, 1.0, 16.0, f32::INFINITY),
            (65504.0, 1.0, 8.0, 65504.0),
            (256.0, 256.0, 0.0, f32::INFINITY),
            (-256.0, 256.0, 0.0, f32::NEG_INFINITY),
        ] {
            let got = lanes(fma_f16x4(f32x4_splat(a), f32x4_splat(b), f32x4_splat(c)));
            assert_eq!(got, [want; 4], "{a} {b} {c}");
        }
    }

    /// The fast path's blind spot: `a*b + c` whose f32 rounding lands exactly on an f16
    /// midpoint. (1 + 2^-10)(1 - 2^-10) + 2050 = 2051 - 2^-20 rounds in f32 to 2051, the midpoint
    /// of 2050 and 2052; ties-to-even of that would give 2052, the exact sum rounds to 2050.
    #[test]
    fn simd128_an_f32_sum_on_an_f16_midpoint_is_rounded_from_the_exact_sum() {
        let (a, b) = (1.0 + 2f32.powi(-10), 1.0 - 2f32.powi(-10));
        for (c, want) in [
            (2050.0f32, 2050.0f32),
            (-2050.0, -2050.0),
            (2048.0, 2048.0),
            (2047.0, 2048.0),
        ] {
            assert_eq!(f16_arith::fma_f16(a, b, c), want, "scalar, c = {c}");
            let got = lanes(fma_f16x4(f32x4_splat(a), f32x4_splat(b), f32x4_splat(c)));
            assert_eq!(got, [want; 4], "c = {c}");
        }
        // Inside a dot product (key 2, lane 37 of step 2) and a mad.
        let mut keys = vec![vec![0.0f32; 256]; 4];
        let mut q = vec![0.0f32; 256];
        (keys[2][37], q[37]) = (2050.0, 1.0);
        (keys[2][128 + 37], q[128 + 37]) = (a, b);
        keys[1][5] = 3.0; // q[5] = 0: the other keys stay at zero
        let got = dot_f16_steps_x4(std::array::from_fn(|i| &keys[i][..]), &q);
        assert_eq!(got, [0.0, 0.0, 2050.0, 0.0]);
        assert_eq!(f16_arith::dot_steps(&keys[2], &q), 2050.0);
        let mut y = vec![2050.0f32; 128];
        let x = vec![a; 128];
        mad_f16_steps([&mut y[..]], &x, [b]);
        assert_eq!(y, vec![2050.0; 128]);
    }

    /// Operands for the step kernels: moderate magnitudes (as attention sees) with some tiny
    /// ones, or any finite f16 (products and sums that overflow to infinity, then NaN).
    fn operand(rng: &mut Rng, moderate: bool) -> f32 {
        let x = rng.f16().to_f32();
        f16_arith::round_f16(if moderate { x.clamp(-4.0, 4.0) } else { x })
    }

    #[test]
    fn simd128_dot_steps_equal_the_scalar_emulation() {
        let mut rng = Rng(42);
        for case in 0..1500 {
            let n = 128 * (1 + case % 3);
            let moderate = case % 3 != 2;
            let keys: Vec<Vec<f32>> = (0..4)
                .map(|_| (0..n).map(|_| operand(&mut rng, moderate)).collect())
                .collect();
            let q: Vec<f32> = (0..n).map(|_| operand(&mut rng, moderate)).collect();
            let got = dot_f16_steps_x4(std::array::from_fn(|b| &keys[b][..]), &q);
            for (b, k) in keys.iter().enumerate() {
                let want = f16_arith::dot_steps(k, &q);
                assert!(
                    same(got[b], want),
                    "dot case {case} key {b}: {} vs {want}",
                    got[b]
                );
            }
        }
        // Sums that overflow: every lane at 65504, whose reduction overflows to infinity,
        // and a key of +inf and -inf halves (NaN).
        let q = vec![1.0f32; 256];
        let big = vec![65504.0f32; 256];
        let mut mixed = big.clone();
        for x in &mut mixed[64..] {
            *x = -65504.0;
        }
        let got = dot_f16_steps_x4([&big, &mixed, &q, &big], &q);
        for (g, k) in got.iter().zip([&big, &mixed, &q, &big]) {
            let want = f16_arith::dot_steps(k, &q);
            assert!(same(*g, want), "{g} vs {want}");
        }
        assert_eq!(got[0], f32::INFINITY);
    }

    #[test]
    fn simd128_mad_and_scale_steps_equal_the_scalar_emulation() {
        let mut rng = Rng(7);
        for case in 0..1500 {
            let n = 128 * (1 + case % 2);
            let moderate = case % 3 != 2;
            let mut gen = |_| operand(&mut rng, moderate);
            let x: Vec<f32> = (0..n).map(&mut gen).collect();
            let ys: Vec<Vec<f32>> = (0..4).map(|_| (0..n).map(&mut gen).collect()).collect();
            // Factors as the softmax gives them, 1 (each new running maximum), 0, and others.
            let mut factor = || match rng.next() % 6 {
                3 => 1.0,
                4 => 0.0,
                5 => rng.f16().to_f32() * 1.37,
                _ => (rng.next() % 1000) as f32 / 997.0,
            };
            let factors = [factor(), factor(), factor(), factor()];
            let mut want = ys.clone();
            for (w, &f) in want.iter_mut().zip(&factors) {
                f16_arith::mad_steps(w, &x, f);
            }
            let mut got = ys.clone();
            let [g0, g1, g2, g3] = &mut got[..] else {
                unreachable!()
            };
            if case % 2 == 0 {
                mad_f16_steps(
                    [&mut g0[..], &mut g1[..], &mut g2[..]],
                    &x,
                    factors[..3].try_into().unwrap(),
                );
                mad_f16_steps([&mut g3[..]], &x, [factors[3]]);
            } else {
                mad_f16_steps(
                    [&mut g0[..], &mut g1[..], &mut g2[..], &mut g3[..]],
                    &x,
                    factors,
                );
            }
            for (h, (g, w)) in got.iter().zip(&want).enumerate() {
                for (i, (g, w)) in g.iter().zip(w).enumerate() {
                    assert!(
                        same(*g, *w),
                        "mad case {case} row {h} [{i}] factor {}: {g} vs {w}",
                        factors[h]
                    );
                }
            }
            let (mut a, mut b) = (ys[0].clone(), ys[0].clone());
            f16_arith::scale_steps(&mut a, factors[0]);
            crate::ops::attention::scale_f16(Simd128, &mut b, f16_arith::round_f16(factors[0]));
            for (g, w) in b.iter().zip(&a) {
                assert!(
                    same(*g, *w),
                    "scale case {case} factor {}: {g} vs {w}",
                    factors[0]
                );
            }
        }
    }

    #[test]
    fn simd128_leftover_sums_equal_the_sequential_sum() {
        // Random f16 bit patterns cover tiny, subnormal, huge, infinite and NaN values; the
        // scaled normals are what attention sees, where summing out of order would round
        // differently. Starting sums as after a step of 128, or 0.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for case in 0..20_000 {
            let n = [4, 8, 64, 96, 124][case % 5];
            let mut gen = |_| {
                let r = next(&mut s);
                let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
                match case % 3 {
                    0 => f16::from_bits(r as u16),
                    1 => f16::from_f32((unit * 8.0 - 4.0) as f32),
                    // Mostly ordinary values with an occasional tiny one.
                    _ if r % 50 == 0 => f16::from_bits((r >> 16) as u16 & 0x83ff),
                    _ => f16::from_f32((unit * 2.0 - 1.0) as f32),
                }
                .to_f32()
            };
            let k: Vec<Vec<f32>> = (0..4).map(|_| (0..n).map(&mut gen).collect()).collect();
            let q: Vec<f32> = (0..n).map(&mut gen).collect();
            let init: [f64; 4] = std::array::from_fn(|b| match case % 4 {
                0 => 0.0,
                _ => gen(b) as f64,
            });
            let got = head_plus_leftovers_x4(init, std::array::from_fn(|b| &k[b][..]), &q);
            for b in 0..4 {
                let want = head_plus_leftovers(init[b], &k[b], &q);
                assert!(
                    same(got[b], want),
                    "case {case} key {b}: {} vs {want}",
                    got[b]
                );
            }
        }
        // A row whose sequential sum rounds: 2^30 + 2^-28 is 2^30 in f64, so the sequential
        // sum ends at 0 while summing the lanes apart would give 2^-28.
        let mut k = vec![0.0f32; 8];
        let mut q = vec![0.0f32; 8];
        (k[0], q[0]) = (32768.0, 32768.0);
        (k[1], q[1]) = (2f32.powi(-14), 2f32.powi(-14));
        (k[4], q[4]) = (-32768.0, 32768.0);
        assert_eq!(head_plus_leftovers(0.0, &k, &q), 0.0);
        assert_eq!(head_plus_leftovers_x4([0.0; 4], [&k[..]; 4], &q), [0.0; 4]);
    }

    /// The scalar loops of `attention::mad_acc` / `scale_acc`, as references.
    fn mad_scalar(acc: &mut [f32], v: &[f16], vs: f32) {
        for (a, &x) in acc.iter_mut().zip(v) {
            *a = f16::from_f32(x.to_f32().mul_add(vs, *a)).to_f32();
        }
    }

    #[test]
    fn mad_and_scale_match_scalar() {
        let mut s = 11;
        let rand_f16 = |s: &mut u64, max_exp: u64| {
            let bits = next(s);
            // Mostly attention-like magnitudes, sometimes any finite f16.
            if bits % 5 == 0 {
                f16::from_bits((bits >> 8) as u16 & 0xfbff)
            } else {
                let e = (bits >> 8) % max_exp;
                f16::from_bits(((bits >> 16) as u16 & 0x83ff) | ((e as u16) << 10))
            }
        };
        for round in 0..6000 {
            let len = 4 + (next(&mut s) % 132) as usize;
            let v: Vec<f16> = (0..len).map(|_| rand_f16(&mut s, 20)).collect();
            let acc0: Vec<f32> = (0..len).map(|_| rand_f16(&mut s, 20).to_f32()).collect();
            let vs = match round % 6 {
                0 => 1.0,
                1 => f32::from_bits(next(&mut s) as u32 & 0x3f7f_ffff), // (0, 1)
                2 => (-((next(&mut s) % 2000) as f32) * 0.01).exp(),
                3 => 0.0,
                // Few significant bits: sums exact in f32 (the plain build's checked lanes).
                4 => rand_f16(&mut s, 16).to_f32(),
                // Any finite f32: products that overflow f16 and f32, or vanish.
                _ => f32::from_bits(next(&mut s) as u32 & 0xff7f_ffff),
            };
            let mut vf = vec![f32::NAN; len];
            crate::ops::attention::widen(Simd128, &v, &mut vf);
            for (w, x) in vf.iter().zip(&v) {
                assert!(same(*w, x.to_f32()), "widen {x:?}");
            }
            let (mut a, mut b) = (acc0.clone(), acc0.clone());
            let done = mad_f16(&mut a, &vf, vs);
            assert_eq!(done, len / 4 * 4);
            mad_scalar(&mut b[..done], &v, vs);
            for i in 0..done {
                assert!(same(a[i], b[i]), "mad {i}: {:?} {vs:e} {}", v[i], acc0[i]);
            }
            let (mut a, mut b) = (acc0.clone(), acc0.clone());
            crate::ops::attention::scale_f16(Simd128, &mut a, vs);
            let done = a.len();
            for x in &mut b[..done] {
                *x = f16::from_f32(*x * vs).to_f32();
            }
            for i in 0..done {
                assert!(same(a[i], b[i]), "scale {i}: {} {vs:e}", acc0[i]);
            }
        }
    }
}
