//! `Op::MoeSum`: the chosen experts' outputs weighted by the route and summed, as llama.cpp
//! does it: every output multiplied by its weight, then added in expert order.

/// `out[t] = Σ_j route[t].weight[j] · x[t][j]` for rows of `m`, `n_used` experts per token.
pub fn moe_sum(x: &[f32], route: &[f32], m: usize, n_used: usize, out: &mut [f32]) {
    for ((xt, rt), ot) in x
        .chunks_exact(m * n_used)
        .zip(route.chunks_exact(2 * n_used))
        .zip(out.chunks_exact_mut(m))
    {
        let weights = &rt[n_used..];
        for (i, o) in ot.iter_mut().enumerate() {
            let mut acc = xt[i] * weights[0];
            for (j, &w) in weights.iter().enumerate().skip(1) {
                acc += xt[j * m + i] * w;
            }
            *o = acc;
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn weighs_and_adds_each_tokens_experts() {
        // Two tokens, two experts each, rows of 2.
        let x = [1.0f32, 2.0, 10.0, 20.0, 3.0, 4.0, 30.0, 40.0];
        let route = [5.0f32, 1.0, 0.5, 0.25, 0.0, 2.0, 1.0, 0.1];
        let mut out = [0.0f32; 4];
        super::moe_sum(&x, &route, 2, 2, &mut out);
        assert_eq!(out, [3.0, 6.0, 3.0 + 3.0, 4.0 + 4.0]);
    }
}
