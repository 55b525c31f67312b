//! `Op::MoeRoute`: a mixture-of-experts router, per token the chosen experts and their weights,
//! computed as llama.cpp's `build_moe_ffn` does: gating (softmax or sigmoid), the optional
//! selection bias, top-k, the optional softmax over the k (delayed softmax), normalisation and
//! scale.

use tessera_core::graph::{Gating, MoeRouteParams};

use super::swiglu::expf_ggml;

/// Routes every token: `logits` rows of `n_expert`, `out` rows of `2 · n_used` (the experts'
/// indices as floats, then their weights). `bias` is the selection bias.
pub fn moe_route(
    logits: &[f32],
    n_expert: usize,
    p: &MoeRouteParams,
    bias: Option<&[f32]>,
    out: &mut [f32],
) {
    let k = p.n_used;
    let mut probs = vec![0.0f32; n_expert];
    let mut order: Vec<usize> = Vec::with_capacity(n_expert);
    for (row, o) in logits
        .chunks_exact(n_expert)
        .zip(out.chunks_exact_mut(2 * k))
    {
        match p.gating {
            Gating::Softmax => softmax(row, &mut probs),
            Gating::Sigmoid => {
                for (y, &x) in probs.iter_mut().zip(row) {
                    *y = 1.0 / (1.0 + (-x).exp());
                }
            }
            Gating::SoftmaxAfterTopK => probs.copy_from_slice(row),
        }
        let selection = |e: usize| probs[e] + bias.map_or(0.0, |b| b[e]);
        order.clear();
        order.extend(0..n_expert);
        // Highest first; equal scores keep the lower index first.
        order.sort_by(|&a, &b| selection(b).total_cmp(&selection(a)).then(a.cmp(&b)));
        let (ids, weights) = o.split_at_mut(k);
        for (j, &e) in order[..k].iter().enumerate() {
            ids[j] = e as f32;
            weights[j] = probs[e];
        }
        if p.gating == Gating::SoftmaxAfterTopK {
            let chosen = weights.to_vec();
            softmax(&chosen, weights);
        }
        if p.normalize {
            // ggml's sum_rows accumulates in f64; the sum is clamped to f16's smallest normal.
            let sum = weights.iter().map(|&w| w as f64).sum::<f64>() as f32;
            let sum = sum.max(6.103_515_6e-5);
            for w in weights.iter_mut() {
                *w /= sum;
            }
        }
        if p.scale != 0.0 && p.scale != 1.0 {
            for w in weights.iter_mut() {
                *w *= p.scale;
            }
        }
    }
}

/// ggml's CPU softmax of one row, as its AVX-512 build computes it: exponentials by ggml's
/// vectorized expf in groups of 16 (each group summed in `_mm512_reduce_add_ps`'s halving
/// order, the group sums in f64), libm's expf for the rest, every value times 1/sum.
pub fn softmax(x: &[f32], y: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    let groups = x.len() / 16 * 16;
    for (xs, ys) in x[..groups]
        .chunks_exact(16)
        .zip(y[..groups].chunks_exact_mut(16))
    {
        let mut lanes = [0.0f32; 16];
        for ((l, &v), o) in lanes.iter_mut().zip(xs).zip(ys.iter_mut()) {
            *l = expf_ggml(v - max);
            *o = *l;
        }
        let mut width = 8;
        while width > 0 {
            for i in 0..width {
                lanes[i] += lanes[i + width];
            }
            width /= 2;
        }
        sum += lanes[0] as f64;
    }
    for (&v, o) in x[groups..].iter().zip(&mut y[groups..]) {
        let e = (v - max).exp();
        sum += e as f64;
        *o = e;
    }
    let inv = (1.0 / sum) as f32;
    for o in y.iter_mut() {
        *o *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn params(gating: Gating, normalize: bool) -> MoeRouteParams {
        MoeRouteParams {
            n_used: 2,
            gating,
            selection_bias: None,
            normalize,
            scale: 1.0,
        }
    }

    #[test]
    fn softmax_routing_picks_the_largest_and_normalizes() {
        let logits = [0.5f32, 2.0, -1.0, 1.0];
        let mut out = [0.0f32; 4];
        moe_route(&logits, 4, &params(Gating::Softmax, true), None, &mut out);
        assert_eq!(&out[..2], &[1.0, 3.0]);
        let (e1, e3) = ((2.0f64 - 1.0).exp(), 1.0);
        assert!((out[2] as f64 - e1 / (e1 + e3)).abs() < 1e-6);
        assert!((out[2] + out[3] - 1.0).abs() < 1e-6);
    }

    #[test]
    fn the_selection_bias_chooses_but_does_not_weigh() {
        let logits = [0.0f32, 1.0, 0.5];
        let bias = [5.0f32, 0.0, 0.0];
        let mut out = [0.0f32; 4];
        let p = MoeRouteParams {
            scale: 2.5,
            ..params(Gating::Sigmoid, false)
        };
        moe_route(&logits, 3, &p, Some(&bias), &mut out);
        assert_eq!(&out[..2], &[0.0, 1.0]);
        assert_eq!(out[2], 0.5 * 2.5);
        assert_eq!(out[3], 1.0 / (1.0 + (-1.0f32).exp()) * 2.5);
    }

    #[test]
    fn delayed_softmax_weighs_only_the_chosen() {
        let logits = [3.0f32, -2.0, 1.0, 0.0];
        let mut out = [0.0f32; 4];
        moe_route(
            &logits,
            4,
            &params(Gating::SoftmaxAfterTopK, false),
            None,
            &mut out,
        );
        assert_eq!(&out[..2], &[0.0, 2.0]);
        let w0 = 1.0 / (1.0 + (-2.0f64).exp());
        assert!((out[2] as f64 - w0).abs() < 1e-6);
    }

    #[test]
    fn softmax_of_many_sums_to_one() {
        let x: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).sin() * 4.0).collect();
        let mut y = vec![0.0; 37];
        softmax(&x, &mut y);
        let s: f64 = y.iter().map(|&v| v as f64).sum();
        assert!((s - 1.0).abs() < 1e-6);
    }
}
