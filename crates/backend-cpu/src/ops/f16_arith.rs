//! Scalar emulation of the f16 arithmetic an AVX512-FP16 build of ggml does in its f16 vector
//! primitives, over whole SIMD steps of [`STEP`] elements (the build the fixtures come from,
//! see docs/backend-cpu.md): `ggml_vec_dot_f16` accumulates in f16 registers (`_mm512_fmadd_ph`,
//! then `_mm512_add_ph` pairs and `_mm512_reduce_add_ph`), `ggml_vec_mad_f16` is one
//! `_mm512_fmadd_ph` with the factor rounded to f16 (`_mm512_set1_ph`), `ggml_vec_scale_f16`
//! one `_mm512_mul_ph`. Every operation rounds once to f16 (nearest, ties to even, with f16
//! subnormals; AVX512-FP16 ignores DAZ/FTZ). Values are held as f32 that are exactly f16.
//!
//! The fused multiply-add is exact before its one rounding: the product of two f16 is exact
//! in f32, the sum `p + c` is split exactly into `s + e` (TwoSum, exact in f32 for any
//! operands), `s` is rounded *to odd* using `e`, and that is rounded to f16: rounding to odd
//! at 24 bits and then to nearest at 11 (or fewer, subnormal) bits equals one rounding to
//! nearest. Tested against exact integer arithmetic below.

#[cfg(test)]
use half::f16;
use tessera_quant::isa::{Scalar, Simd};

/// Elements per SIMD step of an AVX512-FP16 build (`GGML_F16_STEP`: 4 registers × 32 halves).
pub const STEP: usize = 128;
/// Halves per register (`GGML_F16_EPR`).
pub const EPR: usize = 32;

/// Rounds to the nearest f16 (ties to even), returned as f32.
#[inline(always)]
pub fn round_f16(x: f32) -> f32 {
    Scalar.round_f16(x)
}

/// `round_f16(a*b + c)` with one rounding (`_mm512_fmadd_ph`); a, b, c f16-exact.
#[inline(always)]
pub fn fma_f16(a: f32, b: f32, c: f32) -> f32 {
    let p = a * b; // exact: 22 significant bits, exponent ≥ -48
    let s = p + c;
    let bb = s - p;
    let e = (p - (s - bb)) + (c - bb);
    round_f16(round_to_odd(s, e))
}

/// `round_f16(a + b)` (`_mm512_add_ph`), one rounding of the exact sum. The f32 sum rounded to
/// f16 is that: where the f32 sum is inexact, the smaller operand lies below a quarter of the
/// distance from the larger one to its nearest f16 midpoint (the proof is at
/// `attention_avx2::add_f16x8`), so both round to the larger one. (Not `f16::from_f64` of the
/// exact f64 sum: `half`'s software f64 conversion, used on wasm and on x86 without F16C,
/// drops the low 32 mantissa bits before rounding, so a sum just past an f16 midpoint, such as
/// 0.99902344 - 3150, rounds as a tie.)
#[inline(always)]
pub fn add_f16(a: f32, b: f32) -> f32 {
    round_f16(a + b)
}

/// `s` (the rounded `s + e`, `e` its exact error) rounded to odd instead: when inexact and `s`
/// is even, the neighbour of `s` on the side of `e`.
#[inline(always)]
fn round_to_odd(s: f32, e: f32) -> f32 {
    if e != 0.0 && s.is_finite() && s.to_bits() & 1 == 0 {
        let away = (e > 0.0) == (s > 0.0);
        f32::from_bits(if away {
            s.to_bits() + 1
        } else {
            s.to_bits() - 1
        })
    } else {
        s
    }
}

/// `ggml_vec_dot_f16`'s SIMD part over `k.len()` elements (a multiple of [`STEP`]): 4 × 32
/// f16 accumulators, `x0 += x2; x1 += x3; x0 += x1`, then GCC's `_mm512_reduce_add_ph`
/// (halves: 32 → 16 → 8 → 4 → 2 → 1, each lane `x[i] + x[i + w]`). The result is an f16 value.
/// `k` and `q` hold f16-exact values.
pub fn dot_steps(k: &[f32], q: &[f32]) -> f32 {
    let n = k.len();
    debug_assert!(n % STEP == 0 && q.len() >= n);
    let mut acc = [0.0f32; STEP];
    for i in (0..n).step_by(STEP) {
        for (l, a) in acc.iter_mut().enumerate() {
            *a = fma_f16(k[i + l], q[i + l], *a);
        }
    }
    reduce(&acc)
}

/// The reduction of the 4 accumulator registers (lanes `32r + l`) to one f16.
pub fn reduce(acc: &[f32; STEP]) -> f32 {
    let mut x = [0.0f32; EPR];
    for (l, v) in x.iter_mut().enumerate() {
        *v = add_f16(
            add_f16(acc[l], acc[2 * EPR + l]),
            add_f16(acc[EPR + l], acc[3 * EPR + l]),
        );
    }
    let mut w = EPR / 2;
    while w >= 1 {
        for i in 0..w {
            x[i] = add_f16(x[i], x[i + w]);
        }
        w /= 2;
    }
    x[0]
}

/// `ggml_vec_mad_f16`'s SIMD part: `y = f16(x * f16(v) + y)` for `y.len()` (a multiple of
/// [`STEP`]) elements; `x` holds f16-exact values.
pub fn mad_steps(y: &mut [f32], x: &[f32], v: f32) {
    debug_assert!(y.len() % STEP == 0 && x.len() >= y.len());
    let v = round_f16(v);
    for (a, &b) in y.iter_mut().zip(x) {
        *a = fma_f16(b, v, *a);
    }
}

/// `ggml_vec_scale_f16`'s SIMD part: `y = f16(y * f16(v))` (the product of two f16 is exact in
/// f32, so one rounding). The tests' reference for `attention::scale_f16`.
#[cfg(test)]
pub fn scale_steps(y: &mut [f32], v: f32) {
    debug_assert!(y.len() % STEP == 0);
    let v = round_f16(v);
    for a in y.iter_mut() {
        *a = round_f16(*a * v);
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

    /// xorshift64: the random operands of these tests and of `attention_avx2`'s.
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
            let got = fma_f16(a.to_f32(), b.to_f32(), c.to_f32());
            assert!(same(got, want), "fma {a} {b} {c}: {got} vs {want}");
            let want = exact_to_f16(ua + uc, 24);
            let got = add_f16(a.to_f32(), c.to_f32());
            assert!(same(got, want), "add {a} {c}: {got} vs {want}");
            let want = exact_to_f16(ua * ub, 48);
            let got = round_f16(a.to_f32() * b.to_f32());
            assert!(same(got, want), "mul {a} {b}: {got} vs {want}");
        }
        // Overflow and a tie at the top: 65504 + 16 rounds (ties to even) to infinity.
        assert_eq!(fma_f16(65504.0, 1.0, 16.0), f32::INFINITY);
        assert_eq!(fma_f16(65504.0, 1.0, 8.0), 65504.0);
        assert_eq!(fma_f16(256.0, 256.0, 0.0), f32::INFINITY);
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
