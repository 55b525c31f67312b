//! The f16 arithmetic of an AVX512-FP16 build of ggml (the build the fixtures come from, see
//! docs/backend-cpu.md), emulated once over [`Simd`]: `ggml_vec_dot_f16` accumulates in f16
//! registers (`_mm512_fmadd_ph`, then `_mm512_add_ph` pairs and `_mm512_reduce_add_ph`),
//! `ggml_vec_mad_f16` is one `_mm512_fmadd_ph` with the factor rounded to f16
//! (`_mm512_set1_ph`), `ggml_vec_scale_f16` one `_mm512_mul_ph`. Every operation rounds once to
//! f16 (nearest, ties to even, with f16 subnormals; AVX512-FP16 ignores DAZ/FTZ). Values are held
//! as f32 that are exactly f16, whole SIMD steps of [`STEP`] elements at a time.
//!
//! The fused multiply-add is exact before its one rounding. Fast path: the product of two f16
//! is exact in f32 (22 significant bits, exponent ≥ -48), so `s = f32(a*b + c)` is rounded once,
//! and `s` rounded to f16 is the once-rounded result unless `s` is an f16 midpoint (if the exact
//! sum and `s` rounded to different f16 values, an f16 midpoint would lie between them,
//! inclusive; it is an f32, and `s` is the f32 nearest the exact sum, so it is `s`). A midpoint
//! has at most 12 significant bits, which [`Simd::low12_mantissa_zero`] marks. Marked lanes take
//! the exact path: the sum `p + c` split exactly into `s + e` (TwoSum), `s` rounded *to odd*
//! using `e`, and that rounded to f16; rounding to odd at 24 bits and then to nearest at 11 (or
//! fewer, subnormal) bits equals one rounding to nearest. Tested against exact integer
//! arithmetic below, and every ISA against [`Scalar`].

use half::f16;
use tessera_quant::isa::{Scalar, Simd};

/// Elements per SIMD step of an AVX512-FP16 build (`GGML_F16_STEP`: 4 registers × 32 halves).
pub const STEP: usize = 128;

/// Rounds to the nearest f16 (ties to even), returned as f32.
#[inline(always)]
pub fn round_f16(x: f32) -> f32 {
    Scalar.round_f16(x)
}

/// `f16(a*b + c)` rounded once unless the returned mask is set in a lane: such lanes must be
/// redone with [`fma_f16_exact`] (masks of several calls combine with `or_mask`). `a`, `b`, `c`
/// f16-exact.
#[inline(always)]
pub fn fma_f16_fast<S: Simd>(s: S, a: S::F32, b: S::F32, c: S::F32) -> (S::F32, S::Mask) {
    let sum = s.add(s.mul(a, b), c);
    (s.round_f16(sum), s.low12_mantissa_zero(sum))
}

/// `f16(a*b + c)` rounded once, on every lane (TwoSum, rounding to odd, then to f16).
#[inline(always)]
pub fn fma_f16_exact<S: Simd>(s: S, a: S::F32, b: S::F32, c: S::F32) -> S::F32 {
    let p = s.mul(a, b); // exact
    let sum = s.add(p, c);
    let bb = s.sub(sum, p);
    let e = s.add(s.sub(p, s.sub(sum, bb)), s.sub(c, bb));
    s.round_f16(s.round_to_odd(sum, e))
}

/// `f16(a*b + c)` rounded once (`_mm512_fmadd_ph`); a, b, c f16-exact.
#[inline(always)]
pub fn fma_f16<S: Simd>(s: S, a: S::F32, b: S::F32, c: S::F32) -> S::F32 {
    let (r, marks) = fma_f16_fast(s, a, b, c);
    if s.any(marks) {
        fma_f16_exact(s, a, b, c)
    } else {
        r
    }
}

/// `f16(a + b)` (`_mm512_add_ph`) of f16-exact lanes: the f32 sum rounded to f16 is the
/// once-rounded exact sum. Where the f32 sum is exact, that is one rounding. It is inexact only
/// when the smaller operand `b` lies below the f32 ulp of the larger `a` (exponent `E`): f16 `b`
/// is a multiple of its own ulp `2^(Eb-10)`, so `Eb < E - 13` and `|b| < 2^(E-13)`, under half
/// the distance from `a` to its nearest f16 midpoint (`2^(E-11)`, or `2^(E-12)` where `a` is a
/// power of two and the sum falls into the binade below). The exact sum and its f32 rounding
/// then both lie strictly between `a` and that midpoint and round to `a`. (Two f16 subnormals
/// add exactly in f32; an f16 overflow rounds to infinity either way.)
#[inline(always)]
pub fn add_f16<S: Simd>(s: S, a: S::F32, b: S::F32) -> S::F32 {
    s.round_f16(s.add(a, b))
}

/// `ggml_vec_dot_f16`'s SIMD part, bit for bit, for four keys against one query: `k[b]` and `q`
/// hold f16-exact values, all of one length, a multiple of [`STEP`] (not zero). 4 × 32 f16
/// accumulators per key, `x0 += x2; x1 += x3; x0 += x1`, then GCC's `_mm512_reduce_add_ph`
/// (halves: 32 → 16 → 8 → 4 → 2 → 1, each lane `x[i] + x[i + w]`). The results are f16 values.
///
/// Each of the 128 accumulator lanes only ever meets the same lane of later steps, so the loops
/// go vector by vector (`accumulate_x4`): the 4 keys' accumulators of one vector stay in
/// registers through all the steps, and the exact path, when a mark asks for it, redoes only
/// that vector.
#[inline(always)]
pub fn dot_steps_x4<S: Simd>(s: S, k: [&[f32]; 4], q: &[f32]) -> [f32; 4] {
    let n = q.len();
    assert!(n.is_multiple_of(STEP) && n > 0);
    assert!(k[0].len() == n && k[1].len() == n && k[2].len() == n && k[3].len() == n);
    // The 4 registers of 32 halves (R = 0..4, vectors `R * per_reg ..`) into one:
    // (x0 + x2) + (x1 + x3), vector by vector.
    let per_reg = 32 / S::LANES;
    let mut x = [s.x32_splat(0.0); 4];
    for j in 0..per_reg {
        let r0 = accumulate_x4(s, k, q, j * S::LANES);
        let r1 = accumulate_x4(s, k, q, (per_reg + j) * S::LANES);
        let r2 = accumulate_x4(s, k, q, (2 * per_reg + j) * S::LANES);
        let r3 = accumulate_x4(s, k, q, (3 * per_reg + j) * S::LANES);
        for b in 0..4 {
            x[b].as_mut()[j] = add_f16(s, add_f16(s, r0[b], r2[b]), add_f16(s, r1[b], r3[b]));
        }
    }
    // The halvings of 32 lanes: whole vectors while the width is at least a vector, then within
    // the vector.
    let mut out = [0.0f32; 4];
    for b in 0..4 {
        let v = x[b].as_mut();
        let mut w = v.len() / 2;
        while w >= 1 {
            for i in 0..w {
                v[i] = add_f16(s, v[i], v[i + w]);
            }
            w /= 2;
        }
        out[b] = s.sum_halves_f16(v[0]);
    }
    out
}

/// One accumulator vector (lanes `at .. at + LANES` of the 128) of [`dot_steps_x4`]'s four keys
/// through all the steps.
#[inline(always)]
fn accumulate_x4<S: Simd>(s: S, k: [&[f32]; 4], q: &[f32], at: usize) -> [S::F32; 4] {
    let zero = s.splat(0.0);
    // The first step adds to +0 (a -0 product gives +0, as there); the product is exact, so
    // that is one rounding.
    let qv = s.load(&q[at..]);
    let mut a = [zero; 4];
    for b in 0..4 {
        a[b] = s.add(s.mul(s.load(&k[b][at..]), qv), zero);
    }
    let mut a = s.round_f16_n(a);
    let mut i = STEP;
    while i < q.len() {
        let qv = s.load(&q[i + at..]);
        let kv = [
            s.load(&k[0][i + at..]),
            s.load(&k[1][i + at..]),
            s.load(&k[2][i + at..]),
            s.load(&k[3][i + at..]),
        ];
        // `fma_f16_fast` of the 4 keys, their roundings in one `round_f16_n`.
        let mut sum = [zero; 4];
        for b in 0..4 {
            sum[b] = s.add(s.mul(kv[b], qv), a[b]);
        }
        let marks = s.or_mask(
            s.or_mask(s.low12_mantissa_zero(sum[0]), s.low12_mantissa_zero(sum[1])),
            s.or_mask(s.low12_mantissa_zero(sum[2]), s.low12_mantissa_zero(sum[3])),
        );
        if s.any(marks) {
            for b in 0..4 {
                a[b] = fma_f16_exact(s, kv[b], qv, a[b]);
            }
        } else {
            a = s.round_f16_n(sum);
        }
        i += STEP;
    }
    a
}

/// [`dot_steps_x4`] of one key on [`Scalar`]: the reference.
pub fn dot_steps(k: &[f32], q: &[f32]) -> f32 {
    dot_steps_x4(Scalar, [k; 4], q)[0]
}

/// `ggml_vec_mad_f16`'s SIMD part for `N` rows that share one V row: `y[h] = f16(x · f16(v[h]) +
/// y[h])`, each rounded once, over `min` of the lengths, which must be a multiple of 8 vectors
/// of `S` (so of [`STEP`] on every ISA); `x` f16-exact. Each block of `x` is loaded once for all
/// the rows, whose accumulators are independent streams the CPU can overlap.
#[inline(always)]
pub fn mad_steps<S: Simd, const N: usize>(s: S, y: [&mut [f32]; N], x: &[f32], v: [f32; N]) {
    let lanes = S::LANES;
    let block = 8 * lanes;
    let mut n = x.len();
    for y in &y {
        n = n.min(y.len());
    }
    assert!(n.is_multiple_of(block));
    let zero = s.splat(0.0);
    // A factor of 1 (each new running maximum) or 0 (an underflowed weight) makes the fast path
    // exact — the f32 sum of two f16 rounded to f16 is the once-rounded sum ([`add_f16`]), and
    // `0·x + y` is `y` — so those rows never take the exact path (for a factor of 1 the mark
    // would fire on about half the blocks).
    let mut check = [false; N];
    let mut vv = [zero; N];
    for h in 0..N {
        let f = round_f16(v[h]);
        check[h] = f != 1.0 && f != 0.0;
        vv[h] = s.splat(f);
    }
    let mut i = 0;
    while i < n {
        let mut xv = [zero; 8];
        for r in 0..8 {
            xv[r] = s.load(&x[i + r * lanes..]);
        }
        for h in 0..N {
            let y = &mut y[h][i..i + block];
            // `fma_f16_fast` of the 8 vectors, their roundings in one `round_f16_n`.
            let mut sum = [zero; 8];
            for (r, sum_r) in sum.iter_mut().enumerate() {
                *sum_r = s.add(s.mul(xv[r], vv[h]), s.load(&y[r * lanes..]));
            }
            let mut marks = s.low12_mantissa_zero(sum[0]);
            for &sum_r in &sum[1..] {
                marks = s.or_mask(marks, s.low12_mantissa_zero(sum_r));
            }
            let mut out = s.round_f16_n(sum);
            if check[h] && s.any(marks) {
                for r in 0..8 {
                    out[r] = fma_f16_exact(s, xv[r], vv[h], s.load(&y[r * lanes..]));
                }
            }
            for r in 0..8 {
                s.store(&mut y[r * lanes..], out[r]);
            }
        }
        i += block;
    }
}

/// `ggml_vec_mad_f16`'s scalar loop (the elements after the whole steps): `y = f16(fmaf(x, v,
/// y))`, the fused multiply-add rounded to f32, then to f16; `x` f16-exact. Whole vectors of
/// `S`, then one by one.
#[inline(always)]
pub fn mad_tail<S: Simd>(s: S, y: &mut [f32], x: &[f32], v: f32) {
    let n = y.len().min(x.len());
    let done = n / S::LANES * S::LANES;
    let (y, y_rest) = y[..n].split_at_mut(done);
    let (x, x_rest) = x[..n].split_at(done);
    // A factor of 1 (each new running maximum) or 0 leaves the product exact in f32: then
    // `fmaf` is the f32 sum (cheaper where `mul_add` is emulated, as on wasm).
    let exact_product = v == 1.0 || v == 0.0;
    let vv = s.splat(v);
    // Four vectors at a time (one `round_f16_n`), then one at a time. Exact chunks of both,
    // walked in step (no bounds check survives in the loop; a `zip` here stays an
    // out-of-line call inside the large attention kernel).
    let four = done / (4 * S::LANES) * (4 * S::LANES);
    let (y4, y) = y.split_at_mut(four);
    let (x4, x) = x.split_at(four);
    let mut xs = x4.chunks_exact(4 * S::LANES);
    for c in y4.chunks_exact_mut(4 * S::LANES) {
        let Some(xc) = xs.next() else { break };
        let mut sum = [vv; 4];
        for (i, sum_i) in sum.iter_mut().enumerate() {
            let at = i * S::LANES;
            *sum_i = mad_f32(s, s.load(&xc[at..]), vv, s.load(&c[at..]), exact_product);
        }
        let r = s.round_f16_n(sum);
        for i in 0..4 {
            s.store(&mut c[i * S::LANES..], r[i]);
        }
    }
    let mut xs = x.chunks_exact(S::LANES);
    for c in y.chunks_exact_mut(S::LANES) {
        let Some(xc) = xs.next() else { break };
        s.store(
            c,
            s.round_f16(mad_f32(s, s.load(xc), vv, s.load(c), exact_product)),
        );
    }
    for (i, a) in y_rest.iter_mut().enumerate() {
        *a = round_f16(x_rest[i].mul_add(v, *a));
    }
}

/// `fmaf(x, v, y)` lane by lane; where `exact_product` (`v` is 1 or 0), the plain sum, which is
/// the same value. (A function, not a closure: a closure's body would lose the caller's target
/// features.)
#[inline(always)]
fn mad_f32<S: Simd>(s: S, x: S::F32, v: S::F32, y: S::F32, exact_product: bool) -> S::F32 {
    if exact_product {
        s.add(s.mul(x, v), y)
    } else {
        s.mul_add(x, v, y)
    }
}

/// `ggml_vec_scale_f16`'s loops: `y = f16(y * m)` in f32 (the product of two f16 is exact in
/// f32, so one rounding, as the f16 multiply's, where `m` is an f16): whole vectors of `S`,
/// then one by one.
#[inline(always)]
pub fn scale<S: Simd>(s: S, y: &mut [f32], m: f32) {
    let mv = s.splat(m);
    let mut chunks = y.chunks_exact_mut(S::LANES);
    for c in &mut chunks {
        let p = s.mul(s.load(c), mv);
        s.store(c, s.round_f16(p));
    }
    for a in chunks.into_remainder() {
        *a = round_f16(*a * m);
    }
}

/// An f16 row widened (exactly) to f32: whole vectors of `S`, then one by one.
#[inline(always)]
pub fn widen<S: Simd>(s: S, src: &[f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let done = s.widen_f16(&src[..n], &mut dst[..n]);
    for (i, d) in dst[done..n].iter_mut().enumerate() {
        *d = src[done + i].to_f32();
    }
}

/// `dst = src` rounded to f16 precision: whole vectors of `S`, then one by one.
#[inline(always)]
pub fn round_row<S: Simd>(s: S, src: &[f32], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let done = n / S::LANES * S::LANES;
    let (src, src_rest) = src[..n].split_at(done);
    let (dst, dst_rest) = dst[..n].split_at_mut(done);
    let mut xs = src.chunks_exact(S::LANES);
    for d in dst.chunks_exact_mut(S::LANES) {
        let Some(x) = xs.next() else { break };
        s.store(d, s.round_f16(s.load(x)));
    }
    for (i, d) in dst_rest.iter_mut().enumerate() {
        *d = round_f16(src_rest[i]);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    // In Node, under wasm-bindgen-test, where `half` converts in software.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Exact value of an f16 as an integer multiple of 2^-24 (None for inf/NaN).
    fn units24(x: f16) -> Option<i128> {
        let b = x.to_bits();
        let (sign, e, m) = (
            (b >> 15) as i128,
            ((b >> 10) & 0x1f) as i128,
            (b & 0x3ff) as i128,
        );
        if e == 31 {
            return None;
        }
        let mag = if e == 0 { m } else { (m | 0x400) << (e - 1) };
        Some(if sign == 1 { -mag } else { mag })
    }

    /// Rounds `v · 2^-shift` (exact integer `v`) to the nearest f16, ties to even, by integer
    /// arithmetic only: the brute-force reference.
    pub(crate) fn exact_to_f16(v: i128, shift: u32) -> f16 {
        if v == 0 {
            return f16::from_bits(0);
        }
        let neg = v < 0;
        let mag = v.unsigned_abs();
        // f16 values are k·2^(E-10) with E ≥ -14 (subnormals share E = -14), k < 2^11.
        // Find the quantum: the largest of 2^-24 and 2^(floor(log2 |x|) - 10).
        let top = 127 - mag.leading_zeros() as i32; // floor(log2 mag)
        let exp2 = top - shift as i32; // floor(log2 |x|)
        let q = (exp2 - 10).max(-24); // quantum exponent
                                      // k = round(mag · 2^(-shift - q)).
        let sh = -(shift as i32) - q; // mag · 2^sh
        let k: u128 = if sh >= 0 {
            mag << sh
        } else {
            let d = (-sh) as u32;
            let (quot, rem) = (mag >> d, mag & ((1u128 << d) - 1));
            let half = 1u128 << (d - 1);
            if rem > half || (rem == half && quot & 1 == 1) {
                quot + 1
            } else {
                quot
            }
        };
        // Renormalise a carry (k = 2^11) and build the value.
        let (mut k, mut q) = (k, q);
        if k == 1 << 11 {
            k >>= 1;
            q += 1;
        }
        let bits: u16 = if k < 1 << 10 {
            debug_assert_eq!(q, -24);
            k as u16 // subnormal
        } else {
            let e = q + 10 + 15; // biased exponent
            if e >= 31 {
                0x7c00
            } else {
                ((e as u16) << 10) | (k as u16 & 0x3ff)
            }
        };
        f16::from_bits(bits | if neg { 0x8000 } else { 0 })
    }

    /// xorshift64: the random operands of these tests and of `isa_tests`'.
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// A finite f16: random bits, or values of a similar scale (where cancellation and
        /// ties are common), or tiny ones.
        pub(crate) fn f16(&mut self) -> f16 {
            let r = self.next();
            let x = match r % 4 {
                0 => f16::from_bits((r >> 16) as u16),
                1 => f16::from_bits((r >> 16) as u16 & 0x83ff | 0x3800),
                2 => f16::from_bits((r >> 16) as u16 & 0x87ff),
                _ => f16::from_f32(((r >> 20) % 4001) as f32 / 1000.0 - 2.0),
            };
            if x.is_finite() {
                x
            } else {
                f16::from_bits(0x3c00)
            }
        }
    }

    /// Bit equality, except that the integer reference has no signed zeros (IEEE's rules for
    /// the sign of a zero result are the hardware's and f32's alike).
    pub(crate) fn same(got: f32, want: f16) -> bool {
        let g = f16::from_f32(got);
        g.to_f32() == got && (g.to_bits() == want.to_bits() || (got == 0.0 && want.to_f32() == 0.0))
    }

    #[test]
    fn fma_add_and_mul_round_once_like_exact_arithmetic() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..2_000_000 {
            let (a, b, c) = (rng.f16(), rng.f16(), rng.f16());
            let (ua, ub, uc) = (
                units24(a).unwrap(),
                units24(b).unwrap(),
                units24(c).unwrap(),
            );
            let want = exact_to_f16(ua * ub + (uc << 24), 48);
            let got = fma_f16(Scalar, a.to_f32(), b.to_f32(), c.to_f32());
            assert!(same(got, want), "fma {a} {b} {c}: {got} vs {want}");
            let want = exact_to_f16(ua + uc, 24);
            let got = add_f16(Scalar, a.to_f32(), c.to_f32());
            assert!(same(got, want), "add {a} {c}: {got} vs {want}");
            let want = exact_to_f16(ua * ub, 48);
            let got = round_f16(a.to_f32() * b.to_f32());
            assert!(same(got, want), "mul {a} {b}: {got} vs {want}");
        }
        // Overflow and a tie at the top: 65504 + 16 rounds (ties to even) to infinity.
        assert_eq!(fma_f16(Scalar, 65504.0, 1.0, 16.0), f32::INFINITY);
        assert_eq!(fma_f16(Scalar, 65504.0, 1.0, 8.0), 65504.0);
        assert_eq!(fma_f16(Scalar, 256.0, 256.0, 0.0), f32::INFINITY);
    }

    #[test]
    fn the_reference_rounding_agrees_with_half_on_f32_values() {
        // exact_to_f16 against half's conversion where that is a single rounding (an f32 input).
        let mut rng = Rng(77);
        for _ in 0..200_000 {
            let bits = (rng.next() as u32) & 0x7fff_ffff;
            let x = f32::from_bits(bits % 0x4780_0000); // below 2^16
            let m = (x.to_bits() & 0x7f_ffff | 0x80_0000) as i128;
            let e = ((x.to_bits() >> 23) as i32) - 127 - 23;
            if x.to_bits() >> 23 == 0 {
                continue;
            }
            let got = if e >= 0 {
                exact_to_f16(m << e, 0)
            } else {
                exact_to_f16(m, (-e) as u32)
            };
            assert_eq!(got.to_bits(), f16::from_f32(x).to_bits(), "{x}");
        }
    }

    pub(crate) fn widen(x: &[f16]) -> Vec<f32> {
        x.iter().map(|v| v.to_f32()).collect()
    }

    #[test]
    fn dot_steps_follows_the_register_order() {
        // A row where f16 accumulation loses what f32 keeps: lane 0 sums 2048 + 1 + 1 (each +1
        // is a tie, rounded to even: 2048), the order of the reduction is visible too.
        let mut k = vec![f16::ZERO; 256];
        let q = vec![f16::ONE; 256];
        k[0] = f16::from_f32(2048.0);
        k[128] = f16::ONE;
        k[1] = f16::ONE; // lane 1 of register 0
        let got = dot_steps(&widen(&k), &widen(&q));
        // lane 0: 2048 (+1 lost); lane 1: 1. Reduction: 2048 + 1 = 2049 → 2048 (tie, even).
        assert_eq!(got, 2048.0);
        // Brute force: the same operations with exact integer rounding at every step.
        let mut rng = Rng(99);
        for _ in 0..300 {
            // Bounded so that no sum overflows (|k·q| ≤ 128).
            let k: Vec<f16> = (0..256)
                .map(|_| f16::from_f32(rng.f16().to_f32().clamp(-16.0, 16.0)))
                .collect();
            let q: Vec<f16> = (0..256)
                .map(|_| f16::from_f32(rng.f16().to_f32().clamp(-8.0, 8.0)))
                .collect();
            let r = |u: i128, sh: u32| units24(exact_to_f16(u, sh)).unwrap();
            let mut acc = [0i128; 128]; // units of 2^-24
            for i in (0..256).step_by(128) {
                for l in 0..128 {
                    let p = units24(k[i + l]).unwrap() * units24(q[i + l]).unwrap();
                    acc[l] = r(p + (acc[l] << 24), 48);
                }
            }
            let mut x: Vec<i128> = (0..32)
                .map(|l| {
                    r(
                        r(acc[l] + acc[64 + l], 24) + r(acc[32 + l] + acc[96 + l], 24),
                        24,
                    )
                })
                .collect();
            let mut w = 16;
            while w >= 1 {
                for i in 0..w {
                    x[i] = r(x[i] + x[i + w], 24);
                }
                w /= 2;
            }
            let want = exact_to_f16(x[0], 24).to_f32();
            let got = dot_steps(&widen(&k), &widen(&q));
            assert_eq!(got.to_bits(), want.to_bits(), "{got} vs {want}");
        }
    }
}
