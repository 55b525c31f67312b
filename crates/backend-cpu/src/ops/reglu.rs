//! `Op::Reglu`: `relu(gate) * up`, as ggml's `ggml_vec_reglu_f32`.

pub fn reglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = if g > 0.0 { g * u } else { 0.0 };
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn negative_gates_give_zero() {
        let mut o = [1.0f32; 3];
        super::reglu(&[2.0, -1.0, 0.0], &[3.0, 5.0, f32::NAN], &mut o);
        assert_eq!(o, [6.0, 0.0, 0.0]);
    }
}
