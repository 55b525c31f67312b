//! The dispatched kernels (AVX2 on x86-64 machines that have it) must give exactly the bits of
//! the portable ggml-x86-order kernels (`vec_dot::ggml_order`), which define the arithmetic of
//! ggml's x86 kernels; and those must agree with the plain scalar references up to float
//! reassociation (a check of their block layouts independent of any SIMD code).

use crate::vec_dot_support;

use rand::Rng;
use tessera_gguf::GgmlType;
use tessera_quant::blocks::*;
use tessera_quant::vec_dot::{ggml_order, kernel_isa, vec_dot, vec_dot_x4};
use tessera_quant::{quantize_row, row_bytes};
use vec_dot_support::*;

// On wasm32 (the simd128 kernels, run in Node by wasm-bindgen-test-runner) these tests are
// wasm-bindgen tests.
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

type Kernel<W, A> = fn(usize, &[W], &[A]) -> f32;

/// Dispatched single and x4 kernels == ggml_order, bit for bit; ggml_order ≈ plain scalar.
fn check<W: WeightBlock, A: ActBlock>(
    pair: &Pair<W, A>,
    ggml: Kernel<W, A>,
    block_counts: &[usize],
) {
    eprintln!("{} via {}", W::TYPE, kernel_isa());
    let mut cases = 0;
    for mode in MODES {
        for &nb in block_counts {
            for seed in 0..3u64 {
                let mut rng = rng(seed * 7919 + nb as u64 * 13 + mode as u64);
                let w: Vec<W> = generate_row(&mut rng, nb, |r| W::generate(r, mode));
                let acts: Vec<Vec<A>> = (0..4)
                    .map(|_| generate_row(&mut rng, nb, |r| A::generate(r, mode)))
                    .collect();
                let n = nb * pair.block_size;
                let w_bytes: &[u8] = bytemuck::cast_slice(&w);
                let a_bytes: Vec<&[u8]> = acts.iter().map(|a| bytemuck::cast_slice(a)).collect();
                let x4 = vec_dot_x4(
                    W::TYPE,
                    n,
                    w_bytes,
                    [a_bytes[0], a_bytes[1], a_bytes[2], a_bytes[3]],
                );
                for (r, a) in acts.iter().enumerate() {
                    let what = format!("{} {mode:?} nb={nb} seed={seed} row={r}", W::TYPE);
                    let want = ggml(n, &w, a);
                    let got = vec_dot(W::TYPE, n, w_bytes, a_bytes[r]);
                    assert_eq!(got.to_bits(), want.to_bits(), "{what}: {got} vs {want}");
                    assert_eq!(x4[r].to_bits(), want.to_bits(), "{what} (x4)");
                    let plain = (pair.reference)(n, &w, a);
                    let tol = 1e-5 * magnitude(&w, a) + f32::MIN_POSITIVE as f64;
                    assert!(
                        (want as f64 - plain as f64).abs() <= tol || want == plain,
                        "{what}: ggml order {want} vs plain {plain}"
                    );
                    cases += 1;
                }
            }
        }
    }
    assert!(cases > 0);
}

const LEGACY_BLOCKS: [usize; 7] = [1, 2, 3, 8, 18, 48, 512];
const K_BLOCKS: [usize; 5] = [1, 2, 3, 6, 64];

#[test]
fn legacy_kernels_follow_ggml_order_bit_for_bit() {
    check(&Q4_0, ggml_order::vec_dot_q4_0_q8_0, &LEGACY_BLOCKS);
    check(&Q4_1, ggml_order::vec_dot_q4_1_q8_1, &LEGACY_BLOCKS);
    check(&Q5_0, ggml_order::vec_dot_q5_0_q8_0, &LEGACY_BLOCKS);
    check(&Q5_1, ggml_order::vec_dot_q5_1_q8_1, &LEGACY_BLOCKS);
    check(&Q8_0, ggml_order::vec_dot_q8_0_q8_0, &LEGACY_BLOCKS);
    check(&MXFP4, ggml_order::vec_dot_mxfp4_q8_0, &LEGACY_BLOCKS);
}

#[test]
fn k_quant_kernels_follow_ggml_order_bit_for_bit() {
    check(&Q2_K, ggml_order::vec_dot_q2_k_q8_k, &K_BLOCKS);
    check(&Q3_K, ggml_order::vec_dot_q3_k_q8_k, &K_BLOCKS);
    check(&Q4_K, ggml_order::vec_dot_q4_k_q8_k, &K_BLOCKS);
    check(&Q5_K, ggml_order::vec_dot_q5_k_q8_k, &K_BLOCKS);
    check(&Q6_K, ggml_order::vec_dot_q6_k_q8_k, &K_BLOCKS);
}

/// Rows as the engine makes them: weights from the quantizers, activations from
/// `quantize_row` (the activation quantizers), Gaussian-ish values with outliers.
#[test]
fn quantized_rows_follow_ggml_order_bit_for_bit() {
    fn row(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let v: f32 = rng.random_range(-1.0f32..1.0) + rng.random_range(-1.0f32..1.0);
                if i % 97 == 5 {
                    v * 20.0
                } else {
                    v
                }
            })
            .collect()
    }
    fn quantized(ty: GgmlType, x: &[f32]) -> Vec<u64> {
        // u64 words keep the block views aligned.
        let bytes = row_bytes(ty, x.len()).unwrap();
        let mut out = vec![0u64; bytes.div_ceil(8)];
        quantize_row(ty, x, &mut bytemuck::cast_slice_mut(&mut out)[..bytes]).unwrap();
        out
    }
    fn one<W: bytemuck::Pod, A: bytemuck::Pod>(
        ty: GgmlType,
        act: GgmlType,
        ggml: Kernel<W, A>,
        n: usize,
        rng: &mut rand::rngs::StdRng,
    ) {
        let w = quantized(ty, &row(rng, n));
        let a = quantized(act, &row(rng, n));
        let (wb, ab) = (
            &bytemuck::cast_slice::<u64, u8>(&w)[..row_bytes(ty, n).unwrap()],
            &bytemuck::cast_slice::<u64, u8>(&a)[..row_bytes(act, n).unwrap()],
        );
        let want = ggml(n, bytemuck::cast_slice(wb), bytemuck::cast_slice(ab));
        let got = vec_dot(ty, n, wb, ab);
        assert_eq!(got.to_bits(), want.to_bits(), "{ty} n={n}: {got} vs {want}");
    }
    let mut rng = rng(42);
    for &n in &[256usize, 576, 1536, 4096] {
        for _ in 0..20 {
            use GgmlType::*;
            one(Q4_0, Q8_0, ggml_order::vec_dot_q4_0_q8_0, n, &mut rng);
            one(Q4_1, Q8_1, ggml_order::vec_dot_q4_1_q8_1, n, &mut rng);
            one(Q5_0, Q8_0, ggml_order::vec_dot_q5_0_q8_0, n, &mut rng);
            one(Q5_1, Q8_1, ggml_order::vec_dot_q5_1_q8_1, n, &mut rng);
            one(Q8_0, Q8_0, ggml_order::vec_dot_q8_0_q8_0, n, &mut rng);
            one(MXFP4, Q8_0, ggml_order::vec_dot_mxfp4_q8_0, n, &mut rng);
            if n % 256 != 0 {
                continue;
            }
            one(Q2_K, Q8_K, ggml_order::vec_dot_q2_k_q8_k, n, &mut rng);
            one(Q3_K, Q8_K, ggml_order::vec_dot_q3_k_q8_k, n, &mut rng);
            one(Q4_K, Q8_K, ggml_order::vec_dot_q4_k_q8_k, n, &mut rng);
            one(Q5_K, Q8_K, ggml_order::vec_dot_q5_k_q8_k, n, &mut rng);
            one(Q6_K, Q8_K, ggml_order::vec_dot_q6_k_q8_k, n, &mut rng);
        }
    }
}

/// The float order itself, on a case where it shows. Block 0 puts 2^28 in lane 0; block 1 puts
/// 16 in lanes 1..8. ggml: lanes (2^28, 16, ..., 16), then hsum_float_8 =
/// ((a4 + a0) + (a6 + a2)) + ((a5 + a1) + (a7 + a3)) = (2^28 [tie to even] + 32) + 64.
/// Summing per-block totals instead would give 2^28 + 112 → 2^28 + 128.
#[test]
fn q8_0_sums_lanes_like_ggml() {
    let mut x = [BlockQ8_0::zeroed(); 2];
    let mut y = [BlockQ8_0::zeroed(); 2];
    x[0].d = half::f16::from_f32(16384.0);
    y[0].d = half::f16::from_f32(1.0);
    for b in 0..4 {
        x[0].qs[b] = 64;
        y[0].qs[b] = 64;
    }
    x[1].d = half::f16::from_f32(1.0);
    y[1].d = half::f16::from_f32(1.0);
    for l in 1..8 {
        x[1].qs[4 * l] = 4;
        y[1].qs[4 * l] = 4;
    }
    let two28 = 268_435_456.0f32;
    let want = two28 + 96.0;
    let per_block_totals = two28 + 112.0;
    assert_eq!(per_block_totals, two28 + 128.0);
    assert_eq!(ggml_order::vec_dot_q8_0_q8_0(64, &x, &y), want);
    let got = vec_dot(
        GgmlType::Q8_0,
        64,
        bytemuck::cast_slice(&x),
        bytemuck::cast_slice(&y),
    );
    assert_eq!(got, want);
}

use bytemuck::Zeroable;

/// The wasm build (simd128 enabled in .cargo/config.toml) must run the simd128 kernels.
#[cfg(target_arch = "wasm32")]
#[test]
fn wasm_build_dispatches_simd128() {
    let want = if cfg!(target_feature = "relaxed-simd") {
        "simd128+relaxed"
    } else {
        "simd128"
    };
    assert_eq!(kernel_isa(), want);
}

/// The relaxed-SIMD build is exact only where `relaxed_madd` is fused and `relaxed_dot` exact;
/// the machines that run these tests (x86-64 with FMA3; Node with its optimising compiler only,
/// see scripts/test.sh) do both, and the loader's check must say so.
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
#[test]
fn relaxed_simd_is_exact_here() {
    assert!(tessera_quant::vec_dot::relaxed_simd_is_exact());
}
