//! RMS norm, as ggml computes it: the sum of squares accumulated in f64 (each square rounded
//! to f32 first), mean rounded to f32, scale = 1 / sqrt(mean + eps) in f32, then x * scale.

/// Normalizes each row of length `n` of `x` into `out`.
pub fn rms_norm(x: &[f32], out: &mut [f32], n: usize, eps: f32) {
    debug_assert_eq!(x.len(), out.len());
    for (xr, yr) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let mut sum = 0.0f64;
        for &v in xr {
            sum += (v * v) as f64;
        }
        let mean = (sum / n as f64) as f32;
        let scale = 1.0f32 / (mean + eps).sqrt();
        for (y, &v) in yr.iter_mut().zip(xr) {
            *y = v * scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_unit_rms_and_keep_direction() {
        let x: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.37).collect();
        let mut y = vec![0.0; 12];
        rms_norm(&x, &mut y, 4, 1e-6);
        for (xr, yr) in x.chunks(4).zip(y.chunks(4)) {
            let ms: f64 = yr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / 4.0;
            assert!((ms - 1.0).abs() < 1e-4, "{ms}");
            for (a, b) in xr.iter().zip(yr) {
                assert!(a.signum() == b.signum() || *a == 0.0);
            }
        }
    }

    #[test]
    fn matches_an_f64_reference_closely() {
        let x: Vec<f32> = (0..576)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let mut y = vec![0.0; 576];
        rms_norm(&x, &mut y, 576, 1e-5);
        let ms: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / 576.0;
        let s = 1.0 / (ms + 1e-5).sqrt();
        for (a, b) in x.iter().zip(&y) {
            assert!(((*a as f64) * s - *b as f64).abs() < 1e-5);
        }
    }
}
