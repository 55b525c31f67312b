//! `Op::AddWeight`: addition of a weight vector broadcast over rows (biases).

/// `out[r][i] = x[r][i] + w[i]` for every row r of length `w.len()`.
pub fn add_weight(x: &[f32], w: &[f32], out: &mut [f32]) {
    let n = w.len();
    for (xr, yr) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        for ((y, &v), &b) in yr.iter_mut().zip(xr).zip(w) {
            *y = v + b;
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn adds_the_weights_to_each_row() {
        let mut o = [0.0f32; 4];
        super::add_weight(&[1.0, -2.0, 3.5, 0.25], &[2.0, 10.0], &mut o);
        assert_eq!(o, [3.0, 8.0, 5.5, 10.25]);
    }
}
