//! `Op::SwigluOai`: gpt-oss's clamped SwiGLU, as ggml's `swiglu_oai`: `g = min(gate, limit)`,
//! `u = clamp(up, -limit, limit)`, `g / (1 + e^(alpha · -g)) · (u + 1)` (libm's expf).

pub fn swiglu_oai(gate: &[f32], up: &[f32], alpha: f32, limit: f32, out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        let x = g.min(limit);
        let y = u.clamp(-limit, limit);
        *o = x / (1.0 + (alpha * -x).exp()) * (y + 1.0);
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn clamps_both_and_shifts_up() {
        let mut o = [0.0f32; 2];
        super::swiglu_oai(&[10.0, 0.0], &[-9.0, 4.0], 1.702, 7.0, &mut o);
        let sig = 1.0 / (1.0 + (-1.702f32 * 7.0).exp());
        assert_eq!(o[0], 7.0 / (1.0 + (1.702f32 * -7.0).exp()) * -6.0);
        assert!((o[0] - 7.0 * sig * -6.0).abs() < 1e-5);
        assert_eq!(o[1], 0.0);
    }
}
