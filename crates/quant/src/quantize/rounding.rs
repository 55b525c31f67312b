//! The two rounding rules ggml's quantizers use. Both are exact for the value ranges the
//! quantizers produce, and avoid libm calls (no SSE4.1 `roundss` on baseline x86-64).

/// ggml's `nearest_int`: round half to even. ggml adds 1.5 * 2^23 and reads the mantissa,
/// which is exact for |x| <= 2^22 - 1; beyond that (never reached by the quantizers for finite
/// input) we saturate instead of returning garbage, and NaN gives 0.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    if x.abs() <= 4_194_303.0 {
        let v = x + 12_582_912.0;
        (v.to_bits() as i32 & 0x007F_FFFF) - 0x0040_0000
    } else {
        x as i32
    }
}

/// C's `roundf`: round half away from zero, as ggml's Q8_0 / Q8_1 reference quantizers use.
/// `x as i32` truncates and `x - t` is exact for |x| < 2^23; larger values saturate.
#[inline]
pub(crate) fn round_half_away(x: f32) -> i32 {
    let t = x as i32;
    if x.abs() >= 8_388_608.0 {
        return t;
    }
    let frac = x - t as f32;
    if frac >= 0.5 {
        t + 1
    } else if frac <= -0.5 {
        t - 1
    } else {
        t
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
            (1e20, i32::MAX),
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
            (1e20, i32::MAX),
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
