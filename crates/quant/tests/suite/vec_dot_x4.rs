//! `vec_dot_x4` must give, for each activation row, exactly the bits `vec_dot` gives for it:
//! the engine's numerics may not depend on how tokens were batched.

use crate::vec_dot_support;

use half::f16;
use rand::Rng;
use tessera_gguf::GgmlType;
use tessera_quant::vec_dot::{vec_dot, vec_dot_x4};
use vec_dot_support::*;

// On wasm32 (the simd128 kernels, run in Node by wasm-bindgen-test-runner) these tests are
// wasm-bindgen tests.
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn check<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, block_counts: &[usize]) {
    for mode in MODES {
        for &nb in block_counts {
            let mut rng = rng(nb as u64 * 31 + mode as u64);
            let w: Vec<W> = generate_row(&mut rng, nb, |r| W::generate(r, mode));
            // Four different rows, one of them repeated, one from another mode.
            let mut acts: Vec<Vec<A>> = (0..3)
                .map(|_| generate_row(&mut rng, nb, |r| A::generate(r, mode)))
                .collect();
            acts.push(generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random)));
            acts[2] = acts[0].clone();
            let bytes: Vec<&[u8]> = acts.iter().map(|a| bytemuck::cast_slice(a)).collect();
            let n = nb * pair.block_size;
            let w_bytes = bytemuck::cast_slice(&w);
            let got = vec_dot_x4(
                W::TYPE,
                n,
                w_bytes,
                [bytes[0], bytes[1], bytes[2], bytes[3]],
            );
            for (i, a) in bytes.iter().enumerate() {
                let single = vec_dot(W::TYPE, n, w_bytes, a);
                assert_eq!(
                    got[i].to_bits(),
                    single.to_bits(),
                    "{} {mode:?} nb={nb} act {i}: x4 {} vs single {single}",
                    W::TYPE,
                    got[i]
                );
            }
        }
    }
}

const LEGACY_BLOCKS: [usize; 5] = [1, 2, 3, 17, 512];
const K_BLOCKS: [usize; 4] = [1, 2, 5, 64];

#[test]
fn legacy_x4_is_bit_identical() {
    check(&Q4_0, &LEGACY_BLOCKS);
    check(&Q4_1, &LEGACY_BLOCKS);
    check(&Q5_0, &LEGACY_BLOCKS);
    check(&Q5_1, &LEGACY_BLOCKS);
    check(&Q8_0, &LEGACY_BLOCKS);
    check(&MXFP4, &LEGACY_BLOCKS);
}

#[test]
fn k_quant_x4_is_bit_identical() {
    check(&Q2_K, &K_BLOCKS);
    check(&Q3_K, &K_BLOCKS);
    check(&Q4_K, &K_BLOCKS);
    check(&Q5_K, &K_BLOCKS);
    check(&Q6_K, &K_BLOCKS);
}

#[test]
fn float_x4_is_bit_identical() {
    let mut rng = rng(5);
    for n in [1usize, 33, 4096] {
        let row = |r: &mut rand::rngs::StdRng| -> Vec<f32> {
            (0..n).map(|_| r.random_range(-1.0f32..1.0)).collect()
        };
        let w = row(&mut rng);
        let acts: Vec<Vec<f32>> = (0..4).map(|_| row(&mut rng)).collect();
        let b: Vec<&[u8]> = acts.iter().map(|a| bytemuck::cast_slice(a)).collect();
        let got = vec_dot_x4(
            GgmlType::F32,
            n,
            bytemuck::cast_slice(&w),
            [b[0], b[1], b[2], b[3]],
        );
        for i in 0..4 {
            let single = vec_dot(GgmlType::F32, n, bytemuck::cast_slice(&w), b[i]);
            assert_eq!(got[i].to_bits(), single.to_bits(), "F32 n={n}");
        }
        let to16 = |v: &[f32]| -> Vec<f16> { v.iter().map(|&x| f16::from_f32(x)).collect() };
        let w16 = to16(&w);
        let a16: Vec<Vec<f16>> = acts.iter().map(|a| to16(a)).collect();
        let b: Vec<&[u8]> = a16.iter().map(|a| bytemuck::cast_slice(a)).collect();
        let got = vec_dot_x4(
            GgmlType::F16,
            n,
            bytemuck::cast_slice(&w16),
            [b[0], b[1], b[2], b[3]],
        );
        for i in 0..4 {
            let single = vec_dot(GgmlType::F16, n, bytemuck::cast_slice(&w16), b[i]);
            assert_eq!(got[i].to_bits(), single.to_bits(), "F16 n={n}");
        }
    }
}
