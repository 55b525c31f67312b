//! The dispatched kernels (AVX2 on this machine, where available) against the scalar references:
//! float reassociation is the only allowed difference; with integer-valued scales every sum is
//! exact and the results must agree bit for bit.

use crate::vec_dot_support;

use half::f16;
use rand::Rng;
use tessera_gguf::GgmlType;
use tessera_quant::vec_dot::{kernel_isa, scalar, vec_dot, vec_dot_type};
use vec_dot_support::*;

/// Relative tolerance against the magnitude sum of the terms.
const REL_TOL: f64 = 1e-5;

fn check<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, block_counts: &[usize]) {
    eprintln!("{} via {}", W::TYPE, kernel_isa());
    let mut cases = 0;
    for mode in MODES {
        for &nb in block_counts {
            // Exact integer results need the whole sum below 2^24.
            if mode == Mode::ExactIntegers && nb * pair.block_size > 4096 {
                continue;
            }
            for seed in 0..4u64 {
                let mut rng = rng(seed * 1000 + nb as u64);
                let w: Vec<W> = generate_row(&mut rng, nb, |r| W::generate(r, mode));
                let a: Vec<A> = generate_row(&mut rng, nb, |r| A::generate(r, mode));
                let n = nb * pair.block_size;
                let want = (pair.reference)(n, &w, &a);
                let got = vec_dot(
                    W::TYPE,
                    n,
                    bytemuck::cast_slice(&w),
                    bytemuck::cast_slice(&a),
                );
                let what = format!("{} {mode:?} nb={nb} seed={seed}", W::TYPE);
                assert_close(got, want, magnitude(&w, &a), mode, &what);
                cases += 1;
            }
        }
    }
    assert!(cases > 0);
}

fn assert_close(got: f32, want: f32, magnitude: f64, mode: Mode, what: &str) {
    assert!(want.is_finite(), "{what}: reference is {want}");
    if matches!(mode, Mode::ExactIntegers | Mode::Zero) {
        assert_eq!(got.to_bits(), want.to_bits(), "{what}: {got} vs {want}");
        return;
    }
    let err = (got as f64 - want as f64).abs();
    let tol = REL_TOL * magnitude + f32::MIN_POSITIVE as f64;
    assert!(
        err <= tol,
        "{what}: got {got}, want {want}, err {err:e} > tol {tol:e} (magnitude {magnitude:e})"
    );
}

const LEGACY_BLOCKS: [usize; 6] = [1, 2, 3, 8, 37, 512];
const K_BLOCKS: [usize; 5] = [1, 2, 3, 16, 64];

#[test]
fn q4_0_matches_scalar() {
    check(&Q4_0, &LEGACY_BLOCKS);
}

#[test]
fn q4_1_matches_scalar() {
    check(&Q4_1, &LEGACY_BLOCKS);
}

#[test]
fn q5_0_matches_scalar() {
    check(&Q5_0, &LEGACY_BLOCKS);
}

#[test]
fn q5_1_matches_scalar() {
    check(&Q5_1, &LEGACY_BLOCKS);
}

#[test]
fn q8_0_matches_scalar() {
    check(&Q8_0, &LEGACY_BLOCKS);
}

#[test]
fn mxfp4_matches_scalar() {
    check(&MXFP4, &LEGACY_BLOCKS);
}

#[test]
fn q2_k_matches_scalar() {
    check(&Q2_K, &K_BLOCKS);
}

#[test]
fn q3_k_matches_scalar() {
    check(&Q3_K, &K_BLOCKS);
}

#[test]
fn q4_k_matches_scalar() {
    check(&Q4_K, &K_BLOCKS);
}

#[test]
fn q5_k_matches_scalar() {
    check(&Q5_K, &K_BLOCKS);
}

#[test]
fn q6_k_matches_scalar() {
    check(&Q6_K, &K_BLOCKS);
}

/// Float rows of awkward lengths (tails shorter than a vector), random and small-integer values.
fn float_rows(seed: u64, n: usize, integers: bool) -> (Vec<f32>, Vec<f32>) {
    let mut rng = rng(seed);
    let value = |r: &mut rand::rngs::StdRng| {
        if integers {
            r.random_range(-4i32..=4) as f32
        } else {
            r.random_range(-2.0f32..2.0)
        }
    };
    let x = (0..n).map(|_| value(&mut rng)).collect();
    let y = (0..n).map(|_| value(&mut rng)).collect();
    (x, y)
}

const FLOAT_LENGTHS: [usize; 10] = [0, 1, 7, 8, 9, 31, 32, 33, 100, 4096];

#[test]
fn f32_matches_scalar() {
    for &n in &FLOAT_LENGTHS {
        for integers in [false, true] {
            let (x, y) = float_rows(n as u64, n, integers);
            let want = scalar::vec_dot_f32_f32(n, &x, &y);
            let got = vec_dot(
                GgmlType::F32,
                n,
                bytemuck::cast_slice(&x),
                bytemuck::cast_slice(&y),
            );
            let magnitude: f64 = x.iter().zip(&y).map(|(a, b)| (a * b).abs() as f64).sum();
            let mode = if integers {
                Mode::ExactIntegers
            } else {
                Mode::Random
            };
            assert_close(got, want, magnitude, mode, &format!("F32 n={n}"));
        }
    }
}

#[test]
fn f16_matches_scalar() {
    for &n in &FLOAT_LENGTHS {
        for integers in [false, true] {
            let (x, y) = float_rows(n as u64 + 7, n, integers);
            let x: Vec<f16> = x.into_iter().map(f16::from_f32).collect();
            let y: Vec<f16> = y.into_iter().map(f16::from_f32).collect();
            let want = scalar::vec_dot_f16_f16(n, &x, &y);
            let got = vec_dot(
                GgmlType::F16,
                n,
                bytemuck::cast_slice(&x),
                bytemuck::cast_slice(&y),
            );
            let magnitude: f64 = x
                .iter()
                .zip(&y)
                .map(|(a, b)| (a.to_f64() * b.to_f64()).abs())
                .sum();
            let mode = if integers {
                Mode::ExactIntegers
            } else {
                Mode::Random
            };
            assert_close(got, want, magnitude, mode, &format!("F16 n={n}"));
        }
    }
}

#[test]
fn activation_types_pair_like_ggml() {
    use GgmlType as T;
    let pairs = [
        (T::Q4_0, T::Q8_0),
        (T::Q4_1, T::Q8_1),
        (T::Q5_0, T::Q8_0),
        (T::Q5_1, T::Q8_1),
        (T::Q8_0, T::Q8_0),
        (T::MXFP4, T::Q8_0),
        (T::Q2_K, T::Q8_K),
        (T::Q3_K, T::Q8_K),
        (T::Q4_K, T::Q8_K),
        (T::Q5_K, T::Q8_K),
        (T::Q6_K, T::Q8_K),
        (T::F16, T::F16),
        (T::F32, T::F32),
    ];
    for (w, a) in pairs {
        assert_eq!(vec_dot_type(w), Some(a), "{w}");
    }
    for w in [T::Q8_1, T::Q8_K, T::IQ4_NL, T::BF16, T::I8] {
        assert_eq!(vec_dot_type(w), None, "{w}");
    }
}

/// A hand-computed case, so the references themselves are checked against arithmetic done by
/// hand and not only against the SIMD kernels: Q4_1 with every nibble 3, m = 0.5, d = 2, against
/// Q8_1 with every quant 1, d = 0.25: 32 * (2 * 0.25 * 3) + 0.5 * (0.25 * 32) = 48 + 4.
#[test]
fn q4_1_hand_computed() {
    let w = tessera_quant::blocks::BlockQ4_1 {
        d: f16::from_f32(2.0),
        m: f16::from_f32(0.5),
        qs: [0x33; 16],
    };
    let a = tessera_quant::blocks::BlockQ8_1 {
        d: f16::from_f32(0.25),
        s: f16::from_f32(8.0),
        qs: [1; 32],
    };
    assert_eq!(scalar::vec_dot_q4_1_q8_1(32, &[w], &[a]), 52.0);
    let got = vec_dot(
        GgmlType::Q4_1,
        32,
        bytemuck::bytes_of(&w),
        bytemuck::bytes_of(&a),
    );
    assert_eq!(got, 52.0);
}

/// With wrong lengths (a release-build concern; debug builds assert) the kernels use only the
/// whole blocks both rows hold, and an unsupported type gives NaN rather than a panic.
#[cfg(not(debug_assertions))]
#[test]
fn bad_lengths_and_types_do_not_panic() {
    let w = [0u8; 20 * 3];
    let a = [0u8; 36 * 2 + 5];
    assert_eq!(vec_dot(GgmlType::Q4_1, 128, &w, &a), 0.0);
    assert!(vec_dot(GgmlType::IQ2_XXS, 256, &w, &a).is_nan());
    assert_eq!(vec_dot(GgmlType::Q6_K, 256, &[], &[]), 0.0);
}
