//! Element-wise arithmetic: add, scale, and multiplication by a row vector broadcast over rows.

pub fn add(a: &[f32], b: &[f32], out: &mut [f32]) {
    debug_assert!(a.len() == b.len() && a.len() == out.len());
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

pub fn scale(x: &[f32], s: f32, out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * s;
    }
}

/// `out[r][i] = x[r][i] * w[i]` for every row r of length `w.len()`.
pub fn mul_rows(x: &[f32], w: &[f32], out: &mut [f32]) {
    let n = w.len();
    for (xr, yr) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        for ((y, &v), &g) in yr.iter_mut().zip(xr).zip(w) {
            *y = v * g;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elementwise_results() {
        let a = [1.0f32, -2.0, 3.5, 0.25];
        let b = [0.5f32, 2.0, -1.5, 4.0];
        let mut o = [0.0f32; 4];
        add(&a, &b, &mut o);
        assert_eq!(o, [1.5, 0.0, 2.0, 4.25]);
        scale(&a, 2.0, &mut o);
        assert_eq!(o, [2.0, -4.0, 7.0, 0.5]);
        mul_rows(&a, &[2.0, 10.0], &mut o);
        assert_eq!(o, [2.0, -20.0, 7.0, 2.5]);
    }
}
