//! `Op::Activation`: the activation of a gateless feed-forward, as ggml computes each: SiLU
//! with its vectorized exp, GELU from its f16 table, ReLU.

use tessera_core::graph::Activation;

use super::geglu::gelu_table_lookup;
use super::swiglu::silu;

pub fn activation(x: &[f32], act: Activation, out: &mut [f32]) {
    match act {
        Activation::Silu => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = silu(v);
            }
        }
        Activation::Gelu => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = gelu_table_lookup(v);
            }
        }
        Activation::Relu => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = if v > 0.0 { v } else { 0.0 };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn each_activation_matches_its_gated_form_with_an_up_of_one() {
        let x: Vec<f32> = (0..200).map(|i| (i as f32 - 100.0) * 0.13).collect();
        let ones = vec![1.0f32; x.len()];
        let (mut a, mut g) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        activation(&x, Activation::Silu, &mut a);
        crate::ops::swiglu::swiglu_scalar(&x, &ones, &mut g);
        assert_eq!(a, g);
        activation(&x, Activation::Gelu, &mut a);
        crate::ops::geglu::geglu(&x, &ones, &mut g);
        assert_eq!(a, g);
        activation(&x, Activation::Relu, &mut a);
        crate::ops::reglu::reglu(&x, &ones, &mut g);
        assert_eq!(a, g);
    }
}
