//! Gated activations: SwiGLU (`silu(gate) * up`) and GeGLU (`gelu(gate) * up`).
//!
//! GELU is ggml's CPU GELU: the tanh approximation looked up in a table indexed by the input
//! rounded to f16 (the table holds f16 values), with x ≤ -10 → 0 and x ≥ 10 → x. Reproducing the
//! table keeps our activations bit-identical to llama.cpp's, not merely close.

use half::f16;
use std::sync::OnceLock;

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_COEF_A: f32 = 0.044715;

/// The tanh-approximated GELU in f32 (the function the table samples), as ggml's
/// `ggml_gelu_f32` is compiled (GCC, -O3, FMA available): `1.0f + GELU_COEF_A*x*x` is contracted
/// into one fused multiply-add, `fma(GELU_COEF_A*x, x, 1)`; nothing else is. That changes one
/// f16 table entry (x = -1.99902344), enough to move Gemma 3's logprobs by ~0.1.
pub fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (GELU_COEF_A * x).mul_add(x, 1.0)).tanh())
}

fn gelu_table() -> &'static [f16] {
    static TABLE: OnceLock<Vec<f16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu_tanh(f16::from_bits(bits).to_f32())))
            .collect()
    })
}

/// ggml's CPU GELU of one value (see the module comment).
#[inline]
pub fn gelu_ggml(x: f32, table: &[f16]) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        table[f16::from_f32(x).to_bits() as usize].to_f32()
    }
}

/// e^x the way ggml's vectorized `ggml_v_expf` computes it (used by its SiLU/SwiGLU on x86 and
/// ARM): range reduction by `n = round(x·log2 e)`, a degree-5 polynomial in fused multiply-adds,
/// scaled by 2^n. It differs from a correctly rounded exp by an ulp here and there; llama.cpp's
/// activations carry exactly those ulps, so we compute the same.
#[inline]
pub fn expf_ggml(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23: adding it rounds to an integer
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // log2(e)
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),                  // 0x1.7f7d1cp-20
        (-n).mul_add(f32::from_bits(0x3f31_7200), x), // 0x1.62e4p-1
    );
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010) // 0x1.0e4020p-7
        .mul_add(b, f32::from_bits(0x3d2b_9f17)) // 0x1.573e2ep-5
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)), // 0x1.555e66p-3, 0x1.fffdb6p-2
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6).mul_add(b, 1.0)); // 0x1.ffffecp-1
    scale_by_pow2(j, n as i32)
}

/// `j · 2^n` with one rounding, like `_mm512_scalef_ps`.
fn scale_by_pow2(j: f32, n: i32) -> f32 {
    // Split the exponent so each factor is a normal power of two; products by powers of two
    // are exact unless the result is subnormal (rounded once, at the last multiply).
    let half = n / 2;
    let p1 = f32::from_bits(((half + 127) as u32) << 23);
    let p2 = f32::from_bits(((n - half + 127) as u32) << 23);
    (j * p1) * p2
}

/// x / (1 + e^-x), with ggml's vectorized exp.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + expf_ggml(-x))
}

pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::glu_avx2::available() {
        // SAFETY: AVX2 and FMA were detected just above.
        let done = unsafe { super::glu_avx2::swiglu(gate, up, out) };
        swiglu_scalar(&gate[done..], &up[done..], &mut out[done..]);
        return;
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        let done = super::glu_simd128::swiglu(gate, up, out);
        swiglu_scalar(&gate[done..], &up[done..], &mut out[done..]);
        return;
    }
    #[allow(unreachable_code)]
    swiglu_scalar(gate, up, out);
}

/// The scalar reference of [`swiglu`].
pub fn swiglu_scalar(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = silu(g) * u;
    }
}

pub fn geglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let table = gelu_table();
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        // As ggml: the ≥ 10 branch multiplies x itself, the table branch its f16 value.
        *o = gelu_ggml(g, table) * u;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn simd_swiglu_is_bit_identical_to_scalar() {
        let g: Vec<f32> = (0..1003)
            .map(|i| (i as f32 - 500.0) * 0.047)
            .chain([-300.0, 300.0, 0.0, -0.0])
            .collect();
        let u: Vec<f32> = (0..g.len()).map(|i| 1.0 + (i % 7) as f32 * 0.3).collect();
        let mut a = vec![0.0; g.len()];
        let mut b = vec![0.0; g.len()];
        swiglu(&g, &u, &mut a);
        swiglu_scalar(&g, &u, &mut b);
        for i in 0..g.len() {
            assert_eq!(a[i].to_bits(), b[i].to_bits(), "x = {}", g[i]);
        }
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

    #[test]
    fn gelu_table_has_the_contracted_entry() {
        // The one entry where GCC's fused `1 + a*x*x` and the twice-rounded form part (checked
        // with a C program built like ggml): x = f16 0xbfff → 0xa9d3 (0xa9d2 unfused).
        let t = gelu_table();
        assert_eq!(t[0xbfff].to_bits(), 0xa9d3);
    }

    #[test]
    fn gelu_table_is_close_to_the_exact_function_and_clamps() {
        let t = gelu_table();
        for i in -2000..2000 {
            let x = i as f32 * 0.005;
            let got = gelu_ggml(x, t);
            let want = gelu_tanh(x);
            // f16 rounding of the input and of the result.
            assert!(
                (got - want).abs() <= 2e-3 * (1.0 + want.abs()),
                "{x}: {got} vs {want}"
            );
        }
        assert_eq!(gelu_ggml(-11.0, t), 0.0);
        assert_eq!(gelu_ggml(12.5, t), 12.5);
        // The table path rounds the input to f16: two inputs with the same f16 give equal output.
        assert_eq!(gelu_ggml(1.0, t), gelu_ggml(1.0 + 1e-4, t));
    }

    #[test]
    fn geglu_multiplies_by_up() {
        let mut o = [0.0f32; 3];
        geglu(&[0.5, -11.0, 11.0], &[2.0, 3.0, 0.5], &mut o);
        let t = gelu_table();
        assert_eq!(o, [gelu_ggml(0.5, t) * 2.0, 0.0, 5.5]);
    }
}
