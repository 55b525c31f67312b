//! Decode's matrix-vector product: `gemm` with one activation row (four weight rows per kernel
//! call where a four-rows kernel exists, the rest row by row) must give every row exactly the
//! bits `vec_dot` gives it, for every row count (whole groups of four and every remainder). (`vec_dot` itself is
//! checked against the scalar references in vec_dot_kernels.rs.)

use crate::vec_dot_support;

use tessera_quant::vec_dot::{gemm, vec_dot};
use vec_dot_support::*;

// On wasm32 (the simd128 four-rows kernels) these run in Node through wasm-bindgen-test-runner.
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn check<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, block_counts: &[usize]) {
    for mode in MODES {
        for &nb in block_counts {
            for n_rows in [1, 3, 4, 5, 8, 11, 16, 37] {
                let mut rng = rng((nb * 131 + n_rows * 7) as u64 + mode as u64 * 1000);
                let w: Vec<W> = (0..n_rows)
                    .flat_map(|_| generate_row(&mut rng, nb, |r| W::generate(r, mode)))
                    .collect();
                let a: Vec<A> = generate_row(&mut rng, nb, |r| A::generate(r, mode));
                let n = nb * pair.block_size;
                let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
                let mut out = vec![f32::NAN; n_rows];
                gemm(W::TYPE, n, wb, n_rows, ab, 1, &mut out);
                let wr = wb.len() / n_rows;
                for (r, got) in out.iter().enumerate() {
                    let want = vec_dot(W::TYPE, n, &wb[r * wr..(r + 1) * wr], ab);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{} {mode:?} nb={nb} rows={n_rows} row {r}: {got} vs {want}",
                        W::TYPE
                    );
                }
            }
        }
    }
}

#[test]
fn legacy_gemv_is_bit_identical_to_vec_dot() {
    check(&Q4_0, &[1, 3, 20]);
    check(&Q4_1, &[1, 3, 18]);
    check(&Q5_0, &[1, 3, 20]);
    check(&Q5_1, &[1, 3, 20]);
    check(&Q8_0, &[1, 3, 20]);
    check(&MXFP4, &[1, 3, 20]);
}

#[test]
fn k_quant_gemv_is_bit_identical_to_vec_dot() {
    check(&Q4_K, &[1, 4]);
    check(&Q6_K, &[1, 8]);
}
