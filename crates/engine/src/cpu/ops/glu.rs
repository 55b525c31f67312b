//! Gated activations: SwiGLU (`silu(gate) * up`) and GeGLU (`gelu(gate) * up`).
//!
//! GELU is ggml's CPU GELU: the tanh approximation looked up in a table indexed by the input
//! rounded to f16 (the table holds f16 values), with x ≤ -10 → 0 and x ≥ 10 → x. Reproducing the
//! table keeps our activations bit-identical to llama.cpp's, not merely close.

use half::f16;
use std::sync::OnceLock;

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_COEF_A: f32 = 0.044715;

/// The tanh-approximated GELU in f32 (the function the table samples).
pub fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
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

/// x / (1 + e^-x).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
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

/// `cap * tanh(x / cap)`, computed like llama.cpp's graph (scale by 1/cap, tanh, scale by cap).
pub fn softcap(x: &[f32], cap: f32, out: &mut [f32]) {
    let inv = 1.0 / cap;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v * inv).tanh() * cap;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn softcap_bounds_values() {
        let mut o = [0.0f32; 3];
        softcap(&[0.0, 1000.0, -1000.0], 30.0, &mut o);
        assert_eq!(o[0], 0.0);
        assert!((o[1] - 30.0).abs() < 1e-4 && (o[2] + 30.0).abs() < 1e-4);
    }
}
