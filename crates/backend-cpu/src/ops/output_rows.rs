//! `Op::OutputRows`: keeps the rows (tokens) of the batch whose outputs were asked for.

/// `out[r] = x[rows[r]]` for rows of `width`.
pub fn output_rows(x: &[f32], width: usize, rows: &[usize], out: &mut [f32]) {
    for (o, &src) in out.chunks_exact_mut(width).zip(rows) {
        o.copy_from_slice(&x[src * width..(src + 1) * width]);
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn gathers_the_asked_rows_in_order() {
        let x = [0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0];
        let mut o = [0.0f32; 4];
        super::output_rows(&x, 2, &[2, 0], &mut o);
        assert_eq!(o, [20.0, 21.0, 0.0, 1.0]);
    }
}
