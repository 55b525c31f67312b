//! `gemm` must give, for every (weight row, activation row) pair, exactly the bits `vec_dot`
//! gives for it, whatever the numbers of rows and activations (full tiles and every edge): the
//! engine's numerics may not depend on how tokens were batched.

mod vec_dot_support;

use quant::vec_dot::{gemm, vec_dot};
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
}

#[test]
fn k_quant_gemm_is_bit_identical_to_vec_dot() {
    check(&Q2_K, &[1, 3]);
    check(&Q3_K, &[1, 3]);
    check(&Q4_K, &[1, 3]);
    check(&Q5_K, &[1, 3]);
    check(&Q6_K, &[1, 3]);
}
