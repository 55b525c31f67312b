//! wasm32 SIMD128 versions of the attention accumulator loops (`attention::scale_acc` and
//! `attention::mad_rows`) and of the K/V row widening, bit-identical to the scalar ones: the
//! f32 fused multiply-add is
//! computed exactly in f64x2 lanes (`quant::vec_dot::fma_f32x4`; wasm's `f32::mul_add` is a slow
//! software `fmaf`) and the rounding to f16 precision is done with f32 bit arithmetic. Checked
//! by the tests in `attention.rs` (run in Node).

#![cfg(all(target_arch = "wasm32", target_feature = "simd128"))]

use core::arch::wasm32::*;
use half::f16;

/// Rounds 4 floats to the nearest f16 value (ties to even), as `f16::from_f32(x).to_f32()`.
/// Any lane that is NaN or infinite makes the four lanes take the scalar conversion.
#[inline(always)]
fn round_f16(x: v128) -> v128 {
    let abs = f32x4_abs(x);
    if !i32x4_all_true(f32x4_lt(abs, f32x4_splat(f32::INFINITY))) {
        let r = |v: f32| f16::from_f32(v).to_f32();
        return f32x4(
            r(f32x4_extract_lane::<0>(x)),
            r(f32x4_extract_lane::<1>(x)),
            r(f32x4_extract_lane::<2>(x)),
            r(f32x4_extract_lane::<3>(x)),
        );
    }
    let sign = v128_and(x, u32x4_splat(0x8000_0000));
    // f16-normal magnitudes: round the f32 mantissa to 10 bits, ties to even (a carry into
    // the exponent is the right result); above f16::MAX the result is infinite.
    let low_bit = v128_and(u32x4_shr(abs, 13), u32x4_splat(1));
    let normal = v128_and(
        i32x4_add(i32x4_add(abs, u32x4_splat(0x0fff)), low_bit),
        u32x4_splat(!0x1fff),
    );
    let normal = v128_bitselect(
        f32x4_splat(f32::INFINITY),
        normal,
        f32x4_gt(normal, f32x4_splat(f16::MAX.to_f32())),
    );
    // f16-subnormal magnitudes (< 2^-14): multiples of 2^-24. Adding 0.5 (f32 ulp 2^-24 in
    // [0.5, 1)) rounds once, ties to even; subtracting it again is exact.
    let sub = f32x4_sub(f32x4_add(abs, f32x4_splat(0.5)), f32x4_splat(0.5));
    let tiny = f32x4_lt(abs, f32x4_splat(f16::MIN_POSITIVE.to_f32()));
    v128_or(sign, v128_bitselect(sub, normal, tiny))
}

/// 4 f16 values (bits in the low 64 bits of a load) widened exactly to f32.
#[inline(always)]
fn f16x4_to_f32(h: v128) -> v128 {
    let w = u32x4_extend_low_u16x8(h);
    let sign = i32x4_shl(v128_and(w, u32x4_splat(0x8000)), 16);
    let m = v128_and(w, u32x4_splat(0x7fff));
    // Normal and subnormal f16: the bits shifted into place are the value times 2^-112.
    let finite = f32x4_mul(
        i32x4_shl(m, 13),
        f32x4_splat(f32::from_bits((127 + 112) << 23)),
    );
    let special = v128_or(i32x4_shl(m, 13), u32x4_splat(0x7f80_0000)); // infinity / NaN
    let is_special = u32x4_ge(m, u32x4_splat(0x7c00));
    v128_or(sign, v128_bitselect(special, finite, is_special))
}

/// `acc = f16(acc * ms)` over the leading multiple of 4 elements; returns how many were done.
pub fn scale_f16(acc: &mut [f32], ms: f32) -> usize {
    let m = f32x4_splat(ms);
    let done = acc.len() / 4 * 4;
    for c in acc[..done].chunks_exact_mut(4) {
        // SAFETY: `c` holds 4 f32; unaligned loads/stores are allowed.
        unsafe {
            let a = v128_load(c.as_ptr() as *const v128);
            v128_store(c.as_mut_ptr() as *mut v128, round_f16(f32x4_mul(a, m)));
        }
    }
    done
}

/// `dst = src` widened to f32 over the leading multiple of 4 elements of
/// `min(src.len(), dst.len())`; returns how many were done.
pub fn widen(src: &[f16], dst: &mut [f32]) -> usize {
    let n = src.len().min(dst.len()) / 4 * 4;
    for i in (0..n).step_by(4) {
        // SAFETY: i + 4 <= n <= src.len(), dst.len(); the f16 load reads 8 bytes = 4 values.
        unsafe {
            let x = f16x4_to_f32(v128_load64_zero(src.as_ptr().add(i) as *const u64));
            v128_store(dst.as_mut_ptr().add(i) as *mut v128, x);
        }
    }
    n
}

/// `acc = f16(fma(v, vs, acc))` over the leading multiple of 4 elements of
/// `min(acc.len(), v.len())`; returns how many were done. `v` holds f16-exact values.
pub fn mad_f16(acc: &mut [f32], v: &[f32], vs: f32) -> usize {
    let n = acc.len().min(v.len()) / 4 * 4;
    let s = f32x4_splat(vs);
    for i in (0..n).step_by(4) {
        // SAFETY: i + 4 <= n <= acc.len(), v.len().
        unsafe {
            let x = v128_load(v.as_ptr().add(i) as *const v128);
            let p = acc.as_mut_ptr().add(i) as *mut v128;
            let r = quant::vec_dot::fma_f32x4(x, s, v128_load(p));
            v128_store(p, round_f16(r));
        }
    }
    n
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// splitmix64 (also the glu_simd128 tests' operands).
    pub(crate) fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn same(got: f32, want: f32) -> bool {
        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
    }

    #[test]
    fn every_f16_widens_exactly() {
        for h in (0..=u16::MAX).step_by(4) {
            let hs = [h, h + 1, h + 2, h + 3];
            let v = u16x8(hs[0], hs[1], hs[2], hs[3], 0, 0, 0, 0);
            let got = f16x4_to_f32(v);
            let got = [
                f32x4_extract_lane::<0>(got),
                f32x4_extract_lane::<1>(got),
                f32x4_extract_lane::<2>(got),
                f32x4_extract_lane::<3>(got),
            ];
            for (g, &b) in got.iter().zip(&hs) {
                let want = f16::from_bits(b).to_f32();
                assert!(same(*g, want), "{b:#06x}: {g:e} vs {want:e}");
            }
        }
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
        ];
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
        for round in 0..3000 {
            let len = 4 + (next(&mut s) % 132) as usize;
            let v: Vec<f16> = (0..len).map(|_| rand_f16(&mut s, 20)).collect();
            let acc0: Vec<f32> = (0..len).map(|_| rand_f16(&mut s, 20).to_f32()).collect();
            let vs = match round % 4 {
                0 => 1.0,
                1 => f32::from_bits(next(&mut s) as u32 & 0x3f7f_ffff), // (0, 1)
                2 => (-((next(&mut s) % 2000) as f32) * 0.01).exp(),
                _ => 0.0,
            };
            let mut vf = vec![f32::NAN; len];
            assert_eq!(widen(&v, &mut vf), len / 4 * 4);
            for (w, x) in vf.iter().zip(&v).take(len / 4 * 4) {
                assert!(same(*w, x.to_f32()), "widen {x:?}");
            }
            for (w, x) in vf.iter_mut().zip(&v).skip(len / 4 * 4) {
                *w = x.to_f32();
            }
            let (mut a, mut b) = (acc0.clone(), acc0.clone());
            let done = mad_f16(&mut a, &vf, vs);
            assert_eq!(done, len / 4 * 4);
            mad_scalar(&mut b[..done], &v, vs);
            for i in 0..done {
                assert!(same(a[i], b[i]), "mad {i}: {:?} {vs:e} {}", v[i], acc0[i]);
            }
            let (mut a, mut b) = (acc0.clone(), acc0.clone());
            let done = scale_f16(&mut a, vs);
            for x in &mut b[..done] {
                *x = f16::from_f32(*x * vs).to_f32();
            }
            for i in 0..done {
                assert!(same(a[i], b[i]), "scale {i}: {} {vs:e}", acc0[i]);
            }
        }
    }
}
