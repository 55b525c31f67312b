//! The scalar references against an independent route: dequantize the weight row and the
//! activation row (with `quant`'s dequantizers, themselves checked against the `gguf` Python
//! package) and take an f64 dot product. This checks the references' reading of every block
//! layout; activations come from `quant`'s ggml quantizers, as the engine makes them.

use crate::vec_dot_support;

use rand::Rng;
use tessera_quant::vec_dot::{vec_dot, vec_dot_type};
use tessera_quant::{dequantize_row, quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_k};
use tessera_quant::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use vec_dot_support::*;

/// Quantizes `x` to the activation format `A` (Q8_0, Q8_1 or Q8_K).
fn quantize_act<A: ActBlock>(x: &[f32], nb: usize) -> Vec<A> {
    let mut out = vec![A::zeroed(); nb];
    let size = std::mem::size_of::<A>();
    if size == std::mem::size_of::<BlockQ8_0>() {
        quantize_row_q8_0(x, bytemuck::cast_slice_mut::<A, BlockQ8_0>(&mut out));
    } else if size == std::mem::size_of::<BlockQ8_1>() {
        quantize_row_q8_1(x, bytemuck::cast_slice_mut::<A, BlockQ8_1>(&mut out));
    } else {
        quantize_row_q8_k(x, bytemuck::cast_slice_mut::<A, BlockQ8K>(&mut out));
    }
    out
}

fn check<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, nb: usize) {
    let act_type = vec_dot_type(W::TYPE).unwrap();
    for seed in 0..8u64 {
        let mut rng = rng(seed);
        let n = nb * pair.block_size;
        let w: Vec<W> = generate_row(&mut rng, nb, |r| W::generate(r, Mode::Random));
        let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let a: Vec<A> = quantize_act(&x, nb);

        let mut wf = vec![0f32; n];
        let mut af = vec![0f32; n];
        dequantize_row(W::TYPE, bytemuck::cast_slice(&w), &mut wf).unwrap();
        dequantize_row(act_type, bytemuck::cast_slice(&a), &mut af).unwrap();
        let exact: f64 = wf.iter().zip(&af).map(|(&p, &q)| p as f64 * q as f64).sum();
        let magnitude: f64 = wf
            .iter()
            .zip(&af)
            .map(|(&p, &q)| (p as f64 * q as f64).abs())
            .sum();

        // Q8_1 keeps s = d * sum(q) as f16, which the min term uses instead of the exact sum.
        let s_rounding: f64 = if std::mem::size_of::<A>() == std::mem::size_of::<BlockQ8_1>() {
            w.iter()
                .zip(&a)
                .map(|(w, a)| w.magnitude_factors().1 * a.min_factor() * 1e-3)
                .sum()
        } else {
            0.0
        };
        let tol = 2e-5 * magnitude + s_rounding + 1e-30;
        let reference = (pair.reference)(n, &w, &a) as f64;
        assert!(
            (reference - exact).abs() <= tol,
            "{} seed={seed}: reference {reference} vs dequantized dot {exact} (tol {tol:e})",
            W::TYPE
        );
        let fast = vec_dot(
            W::TYPE,
            n,
            bytemuck::cast_slice(&w),
            bytemuck::cast_slice(&a),
        ) as f64;
        assert!(
            (fast - exact).abs() <= tol,
            "{} seed={seed}: kernel {fast} vs dequantized dot {exact} (tol {tol:e})",
            W::TYPE
        );
    }
}

#[test]
fn legacy_references_agree_with_dequantization() {
    check(&Q4_0, 24);
    check(&Q4_1, 24);
    check(&Q5_0, 24);
    check(&Q5_1, 24);
    check(&Q8_0, 24);
    check(&MXFP4, 24);
    check(&MXFP4, 23);
}

#[test]
fn k_quant_references_agree_with_dequantization() {
    check(&Q2_K, 3);
    check(&Q3_K, 3);
    check(&Q4_K, 3);
    check(&Q5_K, 3);
    check(&Q6_K, 3);
}
