//! GeGLU (`Op::Geglu`): `gelu(gate) * up`.
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

/// ggml's CPU GELU of one value, from the table.
pub fn gelu_table_lookup(x: f32) -> f32 {
    gelu_ggml(x, gelu_table())
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

/// `out = gelu(gate) * up`. One scalar loop for every instruction set, by design: each element
/// is a lookup in the 64 Ki-entry f16 table, a gather that SIMD does not speed up (ggml's own
/// GELU loop is scalar for the same reason), and it is a small share of a Gemma step.
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
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

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
