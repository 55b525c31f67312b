//! `Op::Softcap`: `cap * tanh(x / cap)`.

/// Computed like llama.cpp's graph: scale by 1/cap, tanh, scale by cap.
pub fn softcap(x: &[f32], cap: f32, out: &mut [f32]) {
    let inv = 1.0 / cap;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v * inv).tanh() * cap;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn softcap_bounds_values() {
        let mut o = [0.0f32; 3];
        super::softcap(&[0.0, 1000.0, -1000.0], 30.0, &mut o);
        assert_eq!(o[0], 0.0);
        assert!((o[1] - 30.0).abs() < 1e-4 && (o[2] + 30.0).abs() < 1e-4);
    }
}
