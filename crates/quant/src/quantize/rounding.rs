//! The rounding and conversion rules of ggml's quantizers, without libm calls (baseline x86-64
//! has no SSE4.1 `roundss`), including what they do on degenerate input.

/// ggml's `nearest_int`: round half to even by adding 1.5 * 2^23 and reading the mantissa.
/// Exact for |x| <= 2^22 - 1, which is all the quantizers produce for sane input; beyond that
/// we return what ggml's release builds return (its range check is only an `assert`), so even
/// degenerate blocks (e.g. an inverse scale that overflowed to infinity) give ggml's bytes.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() as i32 & 0x007F_FFFF) - 0x0040_0000
}

/// C's float → int conversion as x86 does it (`cvttss2si`): truncate toward zero, and the
/// "integer indefinite" `i32::MIN` for NaN and out-of-range values. ggml's legacy quantizers
/// narrow such results to int8_t / uint8_t (keeping the low byte, so 0 for the indefinite);
/// gguf.quants does the same through numpy. Only degenerate blocks ever hit the edge cases.
#[inline]
pub(crate) fn trunc_to_i32(x: f32) -> i32 {
    if x.abs() < 2_147_483_648.0 {
        x as i32
    } else {
        i32::MIN
    }
}

/// `(int)roundf(x)`: round half away from zero (ggml's Q8_0 / Q8_1 reference quantizers),
/// then [`trunc_to_i32`]'s conversion. Avoids a libm call and branches (so loops over it
/// vectorize): `x - t` is exact for |x| < 2^23, and larger floats are already integers.
#[inline]
pub(crate) fn round_half_away(x: f32) -> i32 {
    let t = x as i32;
    let frac = x - t as f32;
    // Wrapping: for huge x this value is discarded below.
    let rounded = t
        .wrapping_add((frac >= 0.5) as i32)
        .wrapping_sub((frac <= -0.5) as i32);
    let small = x.abs() < 8_388_608.0;
    let in_range = x.abs() < 2_147_483_648.0;
    if small {
        rounded
    } else if in_range {
        t
    } else {
        i32::MIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_is_round_half_even() {
        for &(x, want) in &[
            (0.5f32, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (-2.5, -2),
            (0.49999997, 0),
            (-3.7, -4),
            (4_194_303.0, 4_194_303),
            (-4_194_303.0, -4_194_303),
            // What ggml's bit trick gives for infinities and NaN.
            (f32::INFINITY, -4_194_304),
            (f32::NEG_INFINITY, -4_194_304),
            (f32::NAN, 0),
        ] {
            assert_eq!(nearest_int(x), want, "{x}");
        }
        let mut x = -300.0f32;
        while x < 300.0 {
            assert_eq!(nearest_int(x), x.round_ties_even() as i32, "{x}");
            x += 0.0625;
        }
    }

    #[test]
    fn round_half_away_is_roundf() {
        for &(x, want) in &[
            (0.5f32, 1),
            (1.5, 2),
            (2.5, 3),
            (-0.5, -1),
            (-2.5, -3),
            (0.49999997, 0),
            (-0.49999997, 0),
            (126.99999, 127),
            (-127.0, -127),
            (1e20, i32::MIN),
            (f32::INFINITY, i32::MIN),
            (f32::NAN, i32::MIN),
            (-3e9, i32::MIN),
            (9e6, 9_000_000),
        ] {
            assert_eq!(round_half_away(x), want, "{x}");
        }
        let mut x = -300.0f32;
        while x < 300.0 {
            assert_eq!(round_half_away(x), x.round() as i32, "{x}");
            x += 0.03125;
        }
    }
}
