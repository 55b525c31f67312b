//! SwiGLU (`Op::Swiglu`): `silu(gate) * up`, with ggml's vectorized exp so the activations
//! carry llama.cpp's ulps; written once over `tessera_quant::isa::Simd` and compiled per ISA.

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use tessera_quant::isa::Simd128;
use tessera_quant::isa::{self, Scalar, Simd};
#[cfg(target_arch = "x86_64")]
use tessera_quant::isa::{Avx2, Avx512};

/// e^x the way ggml's vectorized `ggml_v_expf` computes it (used by its SiLU/SwiGLU on x86 and
/// ARM): range reduction by `n = round(x·log2 e)`, a degree-5 polynomial in fused multiply-adds,
/// scaled by 2^n. It differs from a correctly rounded exp by an ulp here and there; llama.cpp's
/// activations carry exactly those ulps, so we compute the same.
#[inline]
pub fn expf_ggml(x: f32) -> f32 {
    expf_lanes(Scalar, x)
}

/// [`expf_ggml`] on every lane of `x`: the one definition, for every instruction set.
#[inline(always)]
fn expf_lanes<S: Simd>(s: S, x: S::F32) -> S::F32 {
    let c = |bits: u32| s.splat(f32::from_bits(bits));
    let r = c(0x4b40_0000); // 0x1.8p23: adding it rounds to an integer
    let z = s.mul_add(x, c(0x3fb8_aa3b), r); // log2(e)
    let n = s.sub(z, r);
    let b = s.neg_mul_add(
        n,
        c(0x35bf_be8e),                      // 0x1.7f7d1cp-20
        s.neg_mul_add(n, c(0x3f31_7200), x), // 0x1.62e4p-1
    );
    let u = s.mul(b, b);
    let j = s.mul_add(
        s.mul_add(
            s.mul_add(c(0x3c07_2010), b, c(0x3d2b_9f17)), // 0x1.0e4020p-7, 0x1.573e2ep-5
            u,
            s.mul_add(c(0x3e2a_af33), b, c(0x3eff_fedb)), // 0x1.555e66p-3, 0x1.fffdb6p-2
        ),
        u,
        s.mul_add(c(0x3f7f_fff6), b, s.splat(1.0)), // 0x1.ffffecp-1
    );
    // `j · 2^n` with one rounding, like `_mm512_scalef_ps`, where |n| <= 192; beyond, 0 for
    // n <= 0 and infinity above.
    let scaled = s.scale_by_pow2(j, n);
    let zero = s.splat(0.0);
    let clamped = s.select(s.le(n, zero), zero, s.splat(f32::INFINITY));
    s.select(s.gt(s.abs(n), s.splat(192.0)), clamped, scaled)
}

/// x / (1 + e^-x), with ggml's vectorized exp.
#[inline]
pub fn silu(x: f32) -> f32 {
    silu_lanes(Scalar, x)
}

#[inline(always)]
fn silu_lanes<S: Simd>(s: S, x: S::F32) -> S::F32 {
    s.div(x, s.add(s.splat(1.0), expf_lanes(s, s.neg(x))))
}

/// `out = silu(gate) * up` over the leading whole vectors of `S`; returns how many elements
/// were done.
#[inline(always)]
fn swiglu_lanes<S: Simd>(s: S, gate: &[f32], up: &[f32], out: &mut [f32]) -> usize {
    let n = gate.len().min(up.len()).min(out.len()) / S::LANES * S::LANES;
    let lanes = out[..n].chunks_exact_mut(S::LANES).zip(
        gate[..n]
            .chunks_exact(S::LANES)
            .zip(up[..n].chunks_exact(S::LANES)),
    );
    for (o, (g, u)) in lanes {
        s.store(o, s.mul(silu_lanes(s, s.load(g)), s.load(u)));
    }
    n
}

/// [`swiglu_lanes`] compiled for AVX2.
///
/// # Safety
/// None beyond the token's existence (it proves the CPU runs AVX2, FMA and F16C).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn swiglu_avx2(s: Avx2, gate: &[f32], up: &[f32], out: &mut [f32]) -> usize {
    swiglu_lanes(s, gate, up, out)
}

/// [`swiglu_lanes`] compiled for AVX-512.
///
/// # Safety
/// None beyond the token's existence (it proves the CPU runs AVX-512 F/BW/DQ/VL).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
unsafe fn swiglu_avx512(s: Avx512, gate: &[f32], up: &[f32], out: &mut [f32]) -> usize {
    swiglu_lanes(s, gate, up, out)
}

pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let done = match isa::level() {
        #[cfg(target_arch = "x86_64")]
        isa::Level::Avx512 => match Avx512::new() {
            // SAFETY: the token proves the features.
            Some(s) => unsafe { swiglu_avx512(s, gate, up, out) },
            None => 0,
        },
        #[cfg(target_arch = "x86_64")]
        level if level.has_avx2() => match Avx2::new() {
            // SAFETY: the token proves the features.
            Some(s) => unsafe { swiglu_avx2(s, gate, up, out) },
            None => 0,
        },
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        isa::Level::Simd128 => swiglu_lanes(Simd128, gate, up, out),
        _ => 0,
    };
    swiglu_scalar(&gate[done..], &up[done..], &mut out[done..]);
}

/// The scalar reference of [`swiglu`].
pub fn swiglu_scalar(gate: &[f32], up: &[f32], out: &mut [f32]) {
    swiglu_lanes(Scalar, gate, up, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn ggml_expf_is_within_two_ulps_of_exp() {
        for i in -4000..4000 {
            let x = i as f32 * 0.02137;
            let got = expf_ggml(x);
            let want = (x as f64).exp();
            let rel = ((got as f64 - want) / want).abs();
            assert!(rel < 3e-7, "{x}: {got} vs {want}");
        }
        assert_eq!(expf_ggml(0.0), 1.0);
        assert_eq!(expf_ggml(-200.0), 0.0);
        assert_eq!(expf_ggml(200.0), f32::INFINITY);
    }

    /// Gates: a grid, exp's overflow and underflow edges, specials, random bits and
    /// activation-like magnitudes; ups of both signs.
    fn swiglu_operands() -> (Vec<f32>, Vec<f32>) {
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
        let mut state = 5;
        for i in 0..100_000 {
            let bits = crate::ops::test_rng::next(&mut state);
            g.push(if i % 2 == 0 {
                f32::from_bits(bits as u32)
            } else {
                ((bits >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 40.0
            });
        }
        let u = (0..g.len()).map(|i| (i % 7) as f32 * 0.3 - 0.8).collect();
        (g, u)
    }

    /// `kernel` (doing a leading part, returning its length) against [`swiglu_scalar`].
    fn check_swiglu(kernel: impl Fn(&[f32], &[f32], &mut [f32]) -> usize, lanes: usize) {
        let (g, u) = swiglu_operands();
        let mut got = vec![0.0; g.len()];
        let mut want = vec![0.0; g.len()];
        assert_eq!(kernel(&g, &u, &mut got), g.len() / lanes * lanes);
        swiglu_scalar(&g, &u, &mut want);
        for i in 0..g.len() / lanes * lanes {
            assert!(
                got[i].to_bits() == want[i].to_bits() || (got[i].is_nan() && want[i].is_nan()),
                "swiglu({:e}, {:e}) = {:e}, got {:e}",
                g[i],
                u[i],
                want[i],
                got[i]
            );
        }
    }

    #[test]
    fn dispatched_swiglu_matches_scalar() {
        check_swiglu(
            |g, u, o| {
                swiglu(g, u, o);
                g.len()
            },
            1,
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_swiglu_matches_scalar() {
        let Some(s) = Avx2::new() else {
            return eprintln!("no AVX2 here: nothing to check");
        };
        // SAFETY: the token proves the features.
        check_swiglu(|g, u, o| unsafe { swiglu_avx2(s, g, u, o) }, 8);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_swiglu_matches_scalar() {
        let Some(s) = Avx512::new() else {
            return eprintln!("no AVX-512 here: nothing to check");
        };
        // SAFETY: the token proves the features.
        check_swiglu(|g, u, o| unsafe { swiglu_avx512(s, g, u, o) }, 16);
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[test]
    fn simd128_swiglu_matches_scalar() {
        check_swiglu(|g, u, o| swiglu_lanes(Simd128, g, u, o), 4);
    }

    #[test]
    fn silu_and_swiglu() {
        assert_eq!(silu(0.0), 0.0);
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
        assert!((silu(-20.0)).abs() < 1e-6);
        let mut o = [0.0f32; 2];
        swiglu(&[1.0, 2.0], &[2.0, -1.0], &mut o);
        assert!((o[0] - 2.0 * 0.731_058_6).abs() < 1e-6);
        assert!((o[1] + 1.761_594_2).abs() < 1e-6);
    }
}
