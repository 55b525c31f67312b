//! `gemm` must give, for every (weight row, activation row) pair, exactly the bits `vec_dot`
//! gives for it, whatever the numbers of rows and activations (full tiles and every edge): the
//! engine's numerics may not depend on how tokens were batched.

use crate::vec_dot_support;

use tessera_quant::vec_dot::{gemm, vec_dot};
use vec_dot_support::*;

// On wasm32 (the simd128 gemm: x4 tiles) these run in Node through wasm-bindgen-test-runner.
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn check<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, block_counts: &[usize]) {
    for mode in MODES {
        for &nb in block_counts {
            for (n_rows, n_acts) in [(1, 1), (4, 4), (5, 3), (17, 9), (3, 6), (33, 2), (20, 13)] {
                let mut rng = rng((nb * 131 + n_rows * 7 + n_acts) as u64 + mode as u64);
                let w: Vec<W> = (0..n_rows)
                    .flat_map(|_| generate_row(&mut rng, nb, |r| W::generate(r, mode)))
                    .collect();
                let a: Vec<A> = (0..n_acts)
                    .flat_map(|_| generate_row(&mut rng, nb, |r| A::generate(r, mode)))
                    .collect();
                let n = nb * pair.block_size;
                let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
                let mut out = vec![f32::NAN; n_rows * n_acts];
                gemm(W::TYPE, n, wb, n_rows, ab, n_acts, &mut out);
                let (wr, ar) = (wb.len() / n_rows, ab.len() / n_acts);
                for t in 0..n_acts {
                    for r in 0..n_rows {
                        let want = vec_dot(
                            W::TYPE,
                            n,
                            &wb[r * wr..(r + 1) * wr],
                            &ab[t * ar..(t + 1) * ar],
                        );
                        let got = out[t * n_rows + r];
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{} {mode:?} nb={nb} {n_rows}x{n_acts} row {r} act {t}: {got} vs {want}",
                            W::TYPE
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn legacy_gemm_is_bit_identical_to_vec_dot() {
    check(&Q4_0, &[1, 3, 20]);
    check(&Q4_1, &[1, 3, 20]);
    check(&Q5_0, &[1, 3, 20]);
    check(&Q5_1, &[1, 3, 20]);
    check(&Q8_0, &[1, 3, 20]);
    check(&MXFP4, &[1, 3, 20]);
}

#[test]
fn k_quant_gemm_is_bit_identical_to_vec_dot() {
    check(&Q2_K, &[1, 3]);
    check(&Q3_K, &[1, 3]);
    check(&Q4_K, &[1, 3]);
    check(&Q5_K, &[1, 3]);
    check(&Q6_K, &[1, 3]);
}

/// Speculative verification's batches (1..=17 tokens) against the portable ggml-order reference
/// (the arithmetic every kernel must reproduce) and `vec_dot`: every batch size, with row counts
/// that leave every kind of leftover after the small-batch tiles (4, 2 and 1 rows).
fn check_small_batches<W: WeightBlock, A: ActBlock>(
    pair: &Pair<W, A>,
    reference: fn(usize, &[W], &[A]) -> f32,
    nb: usize,
) {
    let n = nb * pair.block_size;
    for mode in MODES {
        for n_acts in 1..=17 {
            for n_rows in [1, 2, 3, 5, 6, 7, 8, 19] {
                let mut rng = rng((n_acts * 977 + n_rows * 13) as u64 + mode as u64);
                let w: Vec<W> = (0..n_rows)
                    .flat_map(|_| generate_row(&mut rng, nb, |r| W::generate(r, mode)))
                    .collect();
                let a: Vec<A> = (0..n_acts)
                    .flat_map(|_| generate_row(&mut rng, nb, |r| A::generate(r, mode)))
                    .collect();
                let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
                let mut out = vec![f32::NAN; n_rows * n_acts];
                gemm(W::TYPE, n, wb, n_rows, ab, n_acts, &mut out);
                let (wr, ar) = (wb.len() / n_rows, ab.len() / n_acts);
                for t in 0..n_acts {
                    for r in 0..n_rows {
                        let want = reference(n, &w[r * nb..(r + 1) * nb], &a[t * nb..(t + 1) * nb]);
                        let single = vec_dot(
                            W::TYPE,
                            n,
                            &wb[r * wr..(r + 1) * wr],
                            &ab[t * ar..(t + 1) * ar],
                        );
                        let got = out[t * n_rows + r];
                        assert!(
                            got.to_bits() == want.to_bits() && single.to_bits() == want.to_bits(),
                            "{} {mode:?} {n_rows}x{n_acts} row {r} act {t}: gemm {got}, vec_dot \
                             {single}, reference {want}",
                            W::TYPE
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn small_batch_gemm_is_bit_identical_to_the_reference() {
    use tessera_quant::vec_dot::ggml_order as g;
    check_small_batches(&Q4_0, g::vec_dot_q4_0_q8_0, 20);
    check_small_batches(&Q4_1, g::vec_dot_q4_1_q8_1, 18);
    check_small_batches(&Q5_0, g::vec_dot_q5_0_q8_0, 20);
    check_small_batches(&Q5_1, g::vec_dot_q5_1_q8_1, 3);
    check_small_batches(&Q8_0, g::vec_dot_q8_0_q8_0, 20);
    check_small_batches(&MXFP4, g::vec_dot_mxfp4_q8_0, 20);
    check_small_batches(&MXFP4, g::vec_dot_mxfp4_q8_0, 3);
    check_small_batches(&Q4_K, g::vec_dot_q4_k_q8_k, 3);
    check_small_batches(&Q6_K, g::vec_dot_q6_k_q8_k, 3);
}
