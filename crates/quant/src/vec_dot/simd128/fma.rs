//! ggml's FMA emulated exactly in f64x2 lanes (plain SIMD128 has no FMA instruction; the
//! relaxed-SIMD build uses its fused `relaxed_madd`), and the accumulators of one output.

use super::*;

/// Lanes whose f64 sum `r` is not a normal f32 magnitude (zero, f32-subnormal, NaN): there f32
/// rounding steps differ, and these rare lanes go to `mul_add`.
#[inline(always)]
pub(super) fn outside_f32_normal(r: v128) -> v128 {
    v128_not(f64x2_ge(f64x2_abs(r), f64x2_splat(F32_MIN_NORMAL)))
}

/// Lanes where the f64 sum `r` lies exactly halfway between two f32 values.
#[inline(always)]
pub(super) fn on_f32_midpoint(r: v128) -> v128 {
    let low = v128_and(r, u64x2_splat(BELOW_F32_MANTISSA));
    i64x2_eq(low, u64x2_splat(F32_MIDPOINT_BITS))
}

/// `r = p + c` rounded to f64, corrected where it sits on an f32 midpoint that the exact sum
/// does not: moved one f64 ulp towards the exact sum (TwoSum gives the rounding error), so
/// that rounding to f32 goes the right way (as `fma_f64::fma_f32` does).
#[inline(always)]
pub(super) fn fix_midpoints(r: v128, p: v128, c: v128) -> v128 {
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
pub(super) fn fma4(d: f32, sums: v128, acc: v128) -> v128 {
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
pub(super) fn fma_scalar(a: f32, b: f32, c: f32) -> f32 {
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
pub(super) fn fma_f32x4_f64(a: v128, b: v128, c: v128) -> v128 {
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
pub(super) fn f32x4_to_array(v: v128) -> [f32; 4] {
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
pub(super) struct Acc {
    pub(super) lo: v128,
    pub(super) hi: v128,
    pub(super) m4: v128,
    pub(super) summs: f32,
}

impl Acc {
    #[inline(always)]
    pub(super) fn new() -> Self {
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
    pub(super) fn fma(&mut self, d: f32, lanes: [v128; 2]) {
        self.lo = fma4(d, lanes[0], self.lo);
        self.hi = fma4(d, lanes[1], self.hi);
    }

    /// `hsum_float_8`: high half + low half, then lanes 0+2 / 1+3, then 0+1.
    #[inline(always)]
    pub(super) fn hsum8(&self) -> f32 {
        let q = f32x4_add(self.hi, self.lo);
        let h0 = f32x4_extract_lane::<0>(q) + f32x4_extract_lane::<2>(q);
        let h1 = f32x4_extract_lane::<1>(q) + f32x4_extract_lane::<3>(q);
        h0 + h1
    }

    #[inline(always)]
    pub(super) fn finish_plain(self) -> f32 {
        self.hsum8()
    }

    #[inline(always)]
    pub(super) fn finish_summs(self) -> f32 {
        self.hsum8() + self.summs
    }

    /// `hsum_float_8(main) + (m4[0] + m4[2]) + (m4[1] + m4[3])` (Q4_K).
    #[inline(always)]
    pub(super) fn finish_m4(self) -> f32 {
        let m = self.m4;
        let m02 = f32x4_extract_lane::<0>(m) + f32x4_extract_lane::<2>(m);
        let m13 = f32x4_extract_lane::<1>(m) + f32x4_extract_lane::<3>(m);
        self.hsum8() + (m02 + m13)
    }
}

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
