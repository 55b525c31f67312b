//! ggml's scale searches for the K-quants (`make_qx_quants`, `make_q3_quants`,
//! `make_qkx2_quants` in `ggml-quants.c`), reproduced operation for operation: the result must
//! be the same bytes, so every sum is accumulated in the same order with the same f32
//! products (`w * x * l` is `(w * x) * l`), and nothing may be fused into an FMA.

use super::rounding::nearest_int;

/// Groups whose largest |x| is below this are treated as all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// The element of largest magnitude with its sign (first on ties), and that magnitude.
#[inline]
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// Symmetric quants in [-nmax, nmax) stored as `l + nmax`, scale fitted by weighted least
/// squares with weights x², then refined over 18 nearby inverse scales (ggml's
/// `make_qx_quants` with `rmse_type = 1` and no importance weights). Returns the scale.
pub(crate) fn make_qx_quants(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let mut iscale = -nmax as f32 / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (l_out, &v) in levels.iter_mut().zip(x) {
        let l = quant(iscale, v);
        *l_out = (l + nmax) as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let l = quant(iscale, v);
            let w = v * v;
            sumlx += w * v * l as f32;
            suml2 += w * l as f32 * l as f32;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (l_out, &v) in levels.iter_mut().zip(x) {
                *l_out = (quant(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Symmetric quants in [-nmax, nmax) stored as `l + nmax`, refined by up to 5 rounds of
/// coordinate descent on the x²-weighted error (ggml's `make_q3_quants` with `do_rmse`).
pub(crate) fn make_q3_quants(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let iscale = -nmax as f32 / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (l_out, &v) in levels.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *l_out = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for (l_io, &v) in levels.iter_mut().zip(x) {
            let w = v * v;
            let old = *l_io as f32;
            let mut slx = sumlx - w * v * old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * old * old;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != *l_io as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *l_io = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for l in levels.iter_mut() {
        *l += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Parameters of the affine search of [`make_qkx2_quants`].
pub(crate) struct AffineSearch {
    pub nmax: i32,
    /// The candidate inverse scales are (nmax + rmin + rdelta * is) / (max - min), is = 0..=nstep.
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    /// Minimise the weighted absolute error instead of the squared error.
    pub use_mad: bool,
}

/// Affine quants x ≈ scale * l - min with l in [0, nmax] and min ≥ 0, searching the scale and
/// min that minimise the weighted error (ggml's `make_qkx2_quants`). Returns (scale, min).
pub(crate) fn make_qkx2_quants(
    p: &AffineSearch,
    x: &[f32],
    weights: &[f32],
    levels: &mut [u8],
    aux: &mut [u8],
) -> (f32, f32) {
    let n = x.len();
    let nmax = p.nmax;
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let error = |diff: f32| if p.use_mad { diff.abs() } else { diff * diff };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax) as u8;
        levels[i] = l;
        best_error += weights[i] * error(scale * l as f32 + min - x[i]);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = l as u8;
            let (w, l) = (weights[i], l as f32);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                cur_error += weights[i] * error(this_scale * aux[i] as f32 + this_min - x[i]);
            }
            if cur_error < best_error {
                levels[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}
