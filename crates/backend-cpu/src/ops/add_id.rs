//! `Op::AddId`: each chosen expert's bias added to its output, as ggml's `add_id`.

/// `out[t][j][i] = x[t][j][i] + bias[e][i]` with `e` the `j`-th expert the route chose for
/// token `t`; rows of `m`, `n_used` experts per token, `bias` `[m, n_expert]`.
pub fn add_id(x: &[f32], bias: &[f32], route: &[f32], m: usize, n_used: usize, out: &mut [f32]) {
    for ((xt, rt), ot) in x
        .chunks_exact(m * n_used)
        .zip(route.chunks_exact(2 * n_used))
        .zip(out.chunks_exact_mut(m * n_used))
    {
        for ((xr, or), &e) in xt
            .chunks_exact(m)
            .zip(ot.chunks_exact_mut(m))
            .zip(&rt[..n_used])
        {
            // The route's expert indices are exact floats below n_expert (Op::MoeRoute).
            let b = &bias[e as usize * m..][..m];
            for ((o, &v), &b) in or.iter_mut().zip(xr).zip(b) {
                *o = v + b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn adds_each_chosen_experts_bias() {
        // Two tokens, two of three experts each, rows of 2.
        let x = [1.0f32, 2.0, 10.0, 20.0, 3.0, 4.0, 30.0, 40.0];
        let bias = [0.5f32, 0.25, 100.0, 200.0, -1.0, -2.0];
        let route = [2.0f32, 0.0, 0.9, 0.1, 1.0, 2.0, 0.6, 0.4];
        let mut out = [0.0f32; 8];
        super::add_id(&x, &bias, &route, 2, 2, &mut out);
        assert_eq!(out, [0.0, 0.0, 10.5, 20.25, 103.0, 204.0, 29.0, 38.0]);
    }
}
