//! wasm32 SIMD128 SwiGLU, bit-identical to the scalar `glu::swiglu_scalar` (the same operations
//! in the same order as `glu::expf_ggml`). wasm has no FMA instruction and `f32::mul_add` is a
//! slow software `fmaf`; each fused multiply-add here is computed exactly in f64x2 lanes by
//! `tessera_quant::vec_dot::fma_f32x4`. Checked by the tests at the end (run in Node).

#![cfg(all(target_arch = "wasm32", target_feature = "simd128"))]

use core::arch::wasm32::*;
use tessera_quant::vec_dot::fma_f32x4 as fma;

#[inline(always)]
fn c(bits: u32) -> v128 {
    f32x4_splat(f32::from_bits(bits))
}

/// 4 lanes of `glu::expf_ggml`.
#[inline(always)]
fn expf4(x: v128) -> v128 {
    let r = c(0x4b40_0000);
    let z = fma(x, c(0x3fb8_aa3b), r);
    let n = f32x4_sub(z, r);
    let neg_n = f32x4_neg(n);
    let b = fma(neg_n, c(0x35bf_be8e), fma(neg_n, c(0x3f31_7200), x));
    let u = f32x4_mul(b, b);
    let j = fma(
        fma(
            fma(c(0x3c07_2010), b, c(0x3d2b_9f17)),
            u,
            fma(c(0x3e2a_af33), b, c(0x3eff_fedb)),
        ),
        u,
        fma(c(0x3f7f_fff6), b, f32x4_splat(1.0)),
    );
    // scale_by_pow2(j, n as i32): `as` saturates (NaN → 0) like trunc_sat; `n / 2` truncates
    // towards zero, so add the sign bit before the arithmetic shift.
    let ni = i32x4_trunc_sat_f32x4(n);
    let half = i32x4_shr(i32x4_add(ni, u32x4_shr(ni, 31)), 1);
    let bias = i32x4_splat(127);
    let p1 = i32x4_shl(i32x4_add(half, bias), 23);
    let p2 = i32x4_shl(i32x4_add(i32x4_sub(ni, half), bias), 23);
    let scaled = f32x4_mul(f32x4_mul(j, p1), p2);
    // |n| > 192: 0 where n <= 0, else infinity.
    let big = f32x4_gt(f32x4_abs(n), f32x4_splat(192.0));
    let clamp = v128_bitselect(
        f32x4_splat(0.0),
        f32x4_splat(f32::INFINITY),
        f32x4_le(n, f32x4_splat(0.0)),
    );
    v128_bitselect(clamp, scaled, big)
}

/// SwiGLU over the leading multiple of 4 elements; returns how many were done.
pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) -> usize {
    let n = out.len().min(gate.len()).min(up.len()) / 4 * 4;
    for i in (0..n).step_by(4) {
        // SAFETY: i + 4 <= n <= the length of each slice; unaligned loads/stores are allowed.
        unsafe {
            let g = v128_load(gate.as_ptr().add(i) as *const v128);
            let u = v128_load(up.as_ptr().add(i) as *const v128);
            let e = expf4(f32x4_neg(g));
            let silu = f32x4_div(g, f32x4_add(f32x4_splat(1.0), e));
            v128_store(out.as_mut_ptr().add(i) as *mut v128, f32x4_mul(silu, u));
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::super::attention_simd128::tests::next;
    use super::super::glu::swiglu_scalar;
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn check(g: &[f32], u: &[f32]) {
        let mut a = vec![0.0; g.len()];
        let mut b = vec![0.0; g.len()];
        let done = super::swiglu(g, u, &mut a);
        assert_eq!(done, g.len() / 4 * 4);
        swiglu_scalar(g, u, &mut b);
        for i in 0..done {
            assert!(
                a[i].to_bits() == b[i].to_bits() || (a[i].is_nan() && b[i].is_nan()),
                "swiglu({:e}, {:e}) = {:e}, got {:e}",
                g[i],
                u[i],
                b[i],
                a[i]
            );
        }
    }

    #[test]
    fn swiglu_matches_scalar_on_a_grid_and_edges() {
        let mut g: Vec<f32> = (0..40_000)
            .map(|i| (i as f32 - 20_000.0) * 0.0071)
            .collect();
        g.extend([
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            -1.0e-40,
            87.0,
            -87.0,
            88.7,
            -88.7,
            103.0,
            -104.0,
            133.0,
            -133.1,
            300.0,
            -300.0,
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1.0e-30,
        ]);
        let u: Vec<f32> = (0..g.len()).map(|i| 1.0 + (i % 7) as f32 * 0.3).collect();
        check(&g, &u);
    }

    #[test]
    fn swiglu_matches_scalar_on_random_inputs() {
        let mut s = 5;
        let mut g = Vec::new();
        let mut u = Vec::new();
        for i in 0..200_000 {
            let bits = next(&mut s);
            // Half any bit pattern, half activation-like magnitudes.
            g.push(if i % 2 == 0 {
                f32::from_bits(bits as u32)
            } else {
                ((bits >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 40.0
            });
            u.push(((bits >> 8) as u32 as f32 / u32::MAX as f32 - 0.5) * 8.0);
        }
        check(&g, &u);
    }
}
