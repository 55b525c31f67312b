//! `Op::MulWeight`: multiplication by a weight vector broadcast over rows (norm weights).

/// `out[r][i] = x[r][i] * w[i]` for every row r of length `w.len()`.
pub fn mul_weight(x: &[f32], w: &[f32], out: &mut [f32]) {
    let n = w.len();
    for (xr, yr) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        for ((y, &v), &g) in yr.iter_mut().zip(xr).zip(w) {
            *y = v * g;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn multiplies_each_row_by_the_weights() {
        let mut o = [0.0f32; 4];
        super::mul_weight(&[1.0, -2.0, 3.5, 0.25], &[2.0, 10.0], &mut o);
        assert_eq!(o, [2.0, -20.0, 7.0, 2.5]);
    }
}
