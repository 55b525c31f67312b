//! A correctly rounded f32 fused multiply-add computed with f64 arithmetic, for targets without
//! an FMA instruction (wasm32), where `f32::mul_add` is a slow software `fmaf`.
//!
//! ggml's x86 kernels accumulate with FMA; reproducing their bits needs `fmaf(a, b, c)`, i.e.
//! `a * b + c` rounded once to f32. In f64 the product of two f32 is exact (24 + 24 ≤ 53 bits),
//! so `r = a·b + c` in f64 is the exact value rounded once to 53 bits, and rounding `r` to f32
//! gives the right answer unless that first rounding landed exactly on the midpoint between two
//! f32 values (then the second rounding may go the wrong way). Midpoints are detected by their
//! bits (the 29 bits below an f32 mantissa are `1000…0`); there the error of the f64 addition
//! (Knuth's TwoSum, exact) says which side the exact value lies on, and nudging `r` one f64 ulp
//! towards it makes the final rounding correct (an exact midpoint has no error and rounds to
//! even, as `fmaf` does). Results in the f32 subnormal range (where f32 midpoints are spaced
//! differently) and non-finite results fall back to `f32::mul_add`.
//!
//! This scalar function states the method and carries its proof tests (against `mul_add`,
//! natively and on wasm); the simd128 kernels run it in f64x2 lanes (`simd128/fma.rs`, `fma4`).
//! As a scalar replacement for `mul_add` on wasm it does not pay: compiler-builtins' software
//! `fmaf` already works in f64, with less work per call.

/// Smallest positive normal f32 (2^-126) as f64: below it f32 spacing changes.
pub(crate) const F32_MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;

/// The 29 bits of an f64 mantissa below an f32 mantissa.
pub(crate) const BELOW_F32_MANTISSA: u64 = (1 << 29) - 1;

/// Their value when an f64 lies exactly halfway between two (normal) f32 values.
pub(crate) const F32_MIDPOINT_BITS: u64 = 1 << 28;

/// `fmaf(a, b, c)`: `a * b + c` rounded once to f32 (round to nearest even), bit-identical to
/// `a.mul_add(b, c)`.
#[inline]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    let p = a as f64 * b as f64; // exact
    let c = c as f64;
    let r = p + c;
    if r == 0.0 {
        // Exact cancellation (or 0 + 0): IEEE's sign rules are the same in f32 and f64.
        return r as f32;
    }
    if r.is_nan() || r.abs() < F32_MIN_NORMAL || r.is_infinite() {
        // f32-subnormal, NaN or infinite: rare; let the (slow) exact routine decide.
        return a.mul_add(b, c as f32);
    }
    let bits = r.to_bits();
    if bits & BELOW_F32_MANTISSA != F32_MIDPOINT_BITS {
        return r as f32;
    }
    // TwoSum: err = (p + c) - r exactly.
    let c_part = r - p;
    let p_part = r - c_part;
    let err = (p - p_part) + (c - c_part);
    if err == 0.0 {
        return r as f32; // a true tie: round to even
    }
    // One f64 ulp away from the midpoint, towards the exact value: same binade, since the
    // midpoint's low bits are 1000…0.
    let towards_larger_magnitude = (err > 0.0) == (r > 0.0);
    let nudged = if towards_larger_magnitude {
        bits + 1
    } else {
        bits - 1
    };
    f64::from_bits(nudged) as f32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    // On wasm32 (where mul_add is the software fmaf) these run under wasm-bindgen-test.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// splitmix64: enough randomness for these checks without a dev-dependency.
    pub(crate) fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn check(a: f32, b: f32, c: f32) {
        let want = a.mul_add(b, c);
        let got = fma_f32(a, b, c);
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "fma({a:e}, {b:e}, {c:e}) = {want:e}, got {got:e}"
        );
    }

    #[test]
    fn random_bit_patterns_match_mul_add() {
        let mut s = 1;
        for _ in 0..200_000 {
            let (a, b, c) = (next(&mut s), next(&mut s), next(&mut s));
            check(
                f32::from_bits(a as u32),
                f32::from_bits(b as u32),
                f32::from_bits(c as u32),
            );
        }
    }

    /// Kernel-like operands: a scale times a small integer lane sum plus an accumulator of
    /// similar magnitude, so products and sums often need few bits and hit midpoints.
    #[test]
    fn kernel_like_operands_match_mul_add() {
        let mut s = 2;
        for _ in 0..400_000 {
            let d = half::f16::from_bits(next(&mut s) as u16 & 0x7BFF).to_f32();
            let d = d * half::f16::from_bits(next(&mut s) as u16 & 0x7BFF).to_f32();
            let sum = (next(&mut s) % 20_001) as i32 - 10_000;
            let c = d * ((next(&mut s) % 200_001) as f32 - 100_000.0);
            check(d, sum as f32, c);
            check(-d, sum as f32, c);
        }
    }

    /// Operands built so that the f64 sum lands exactly on an f32 midpoint, with the exact value
    /// just below, just above (negated c), or exactly on it: the cases TwoSum is there for.
    #[test]
    fn f64_midpoints_round_like_mul_add() {
        let mut s = 3;
        let mut hits = 0;
        for _ in 0..50_000 {
            // c is an integer in [2^23, 2^24): its f32 ulp is 1, so c + 0.5 is a midpoint.
            let c = f32::from_bits((next(&mut s) as u32 & 0x007F_FFFF) | 0x4B00_0000);
            // a * b = 0.5 - k^2 2^-47 (k = 0: exactly 0.5): below f64's resolution near 2^23.
            let k = (next(&mut s) % 6) as f32;
            let a = 0.5 * (1.0 + k * f32::EPSILON);
            let b = 1.0 - k * f32::EPSILON;
            for c in [c, -c] {
                if (a as f64 * b as f64 + c as f64).to_bits() & BELOW_F32_MANTISSA
                    == F32_MIDPOINT_BITS
                {
                    hits += 1;
                }
                check(a, b, c);
                check(b, a, c);
                check(-a, b, c);
            }
        }
        assert!(hits > 90_000, "only {hits} midpoint cases were generated");
    }

    #[test]
    fn edge_values_match_mul_add() {
        let vals = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::MIN_POSITIVE / 3.0,
            1.0e-45,
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1.0 + f32::EPSILON,
            3.0e19,
            2.0f32.powi(-75),
        ];
        for a in vals {
            for b in vals {
                for c in vals {
                    check(a, b, c);
                }
            }
        }
    }
}
