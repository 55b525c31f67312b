//! Speed of the wasm vec-dot kernels in ns per block (per 32-element block for the legacy types,
//! per 256-element super-block for the K-quants): the dispatched simd128 kernels (single row,
//! x4 per activation row, and decode's `gemm` of four weight rows × one activation row per
//! weight row) against the portable ggml-order kernels (what a build without
//! simd128 runs; their FMAs are software `fmaf`) and the plain scalar references.
//!
//! Ignored by default; run in Node (figures in bench/results/, kind `wasm-kernels`):
//! ```sh
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner cargo test -p tessera-quant \
//!   --release --target wasm32-unknown-unknown --test vec_dot_wasm_bench -- --include-ignored --nocapture
//! ```

#![cfg(target_arch = "wasm32")]

use crate::vec_dot_support;

use std::hint::black_box;
use tessera_quant::vec_dot::{gemm, ggml_order, kernel_isa, vec_dot, vec_dot_x4};
use vec_dot_support::*;
use wasm_bindgen_test::{console_log, wasm_bindgen_test};

/// Row length of every case: 4096 elements (128 legacy blocks, 16 super-blocks).
const N: usize = 4096;

/// `performance.now()` in milliseconds (Node and browsers).
fn now_ms() -> f64 {
    use js_sys::{Function, Reflect};
    let perf = Reflect::get(&js_sys::global(), &"performance".into()).expect("performance");
    let now: Function = Reflect::get(&perf, &"now".into())
        .expect("performance.now")
        .into();
    now.call0(&perf)
        .expect("performance.now()")
        .as_f64()
        .unwrap()
}

/// Nanoseconds per call of `f`: the best of 5 windows of at least 40 ms (other jobs share the
/// machine's cores; the minimum is the least disturbed figure), after 100 ms of warm-up (V8 first
/// runs wasm in its baseline compiler and tiers hot functions up to the optimising one).
fn ns_per_call(mut f: impl FnMut()) -> f64 {
    let warm_up = now_ms();
    while now_ms() - warm_up < 100.0 {
        for _ in 0..10 {
            f();
        }
    }
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let mut calls = 0u64;
        let start = now_ms();
        loop {
            for _ in 0..20 {
                f();
            }
            calls += 20;
            let elapsed = now_ms() - start;
            if elapsed >= 40.0 {
                best = best.min(elapsed * 1e6 / calls as f64);
                break;
            }
        }
    }
    best
}

type Kernel<W, A> = fn(usize, &[W], &[A]) -> f32;

fn bench<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, ggml: Kernel<W, A>) {
    let nb = N / pair.block_size;
    let mut rng = rng(42);
    let w4: Vec<W> = (0..4)
        .flat_map(|_| generate_row(&mut rng, nb, |r| W::generate(r, Mode::Random)))
        .collect();
    let w = w4[..nb].to_vec();
    let acts: Vec<Vec<A>> = (0..4)
        .map(|_| generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random)))
        .collect();
    let wb: &[u8] = bytemuck::cast_slice(&w);
    let ab: Vec<&[u8]> = acts.iter().map(|a| bytemuck::cast_slice(a)).collect();
    let per_block = |ns: f64| ns / nb as f64;

    let simd = per_block(ns_per_call(|| {
        black_box(vec_dot(W::TYPE, N, black_box(wb), black_box(ab[0])));
    }));
    let x4 = per_block(ns_per_call(|| {
        black_box(vec_dot_x4(
            W::TYPE,
            N,
            black_box(wb),
            [ab[0], ab[1], ab[2], ab[3]],
        ));
    })) / 4.0;
    let w4b: &[u8] = bytemuck::cast_slice(&w4);
    let mut out = [0.0f32; 4];
    let rows4 = per_block(ns_per_call(|| {
        gemm(W::TYPE, N, black_box(w4b), 4, black_box(ab[0]), 1, &mut out);
        black_box(&out);
    })) / 4.0;
    let portable = per_block(ns_per_call(|| {
        black_box(ggml(N, black_box(&w), black_box(&acts[0])));
    }));
    let plain = per_block(ns_per_call(|| {
        black_box((pair.reference)(N, black_box(&w), black_box(&acts[0])));
    }));
    console_log!(
        "{:<5} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>7.1}x",
        format!("{}", W::TYPE),
        simd,
        x4,
        rows4,
        portable,
        plain,
        portable / simd
    );
}

#[wasm_bindgen_test]
#[ignore]
fn vec_dot_ns_per_block() {
    console_log!(
        "ns/block, rows of {N} ({}); x4 = per activation row; rows4 = per weight row; speedup = ggml-order / {}",
        kernel_isa(),
        kernel_isa()
    );
    console_log!(
        "type  {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        kernel_isa(),
        "x4",
        "rows4",
        "ggml-ord",
        "scalar",
        "speedup"
    );
    bench(&Q4_0, ggml_order::vec_dot_q4_0_q8_0);
    bench(&Q4_1, ggml_order::vec_dot_q4_1_q8_1);
    bench(&Q5_0, ggml_order::vec_dot_q5_0_q8_0);
    bench(&Q5_1, ggml_order::vec_dot_q5_1_q8_1);
    bench(&Q8_0, ggml_order::vec_dot_q8_0_q8_0);
    bench(&Q2_K, ggml_order::vec_dot_q2_k_q8_k);
    bench(&Q3_K, ggml_order::vec_dot_q3_k_q8_k);
    bench(&Q4_K, ggml_order::vec_dot_q4_k_q8_k);
    bench(&Q5_K, ggml_order::vec_dot_q5_k_q8_k);
    bench(&Q6_K, ggml_order::vec_dot_q6_k_q8_k);
}

/// Decode's matrix-vector product at model shapes (SmolLM2's FFN and output matrix), whose
/// weights stream from memory instead of sitting in L1: ns per weight block, in the file
/// layout and, for the types that have one here, repacked.
#[wasm_bindgen_test]
#[ignore]
fn gemv_ns_per_block_at_model_shapes() {
    fn run<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, n: usize, rows: usize) {
        let nb = n / pair.block_size;
        let mut rng = rng(7);
        let w: Vec<W> = generate_row(&mut rng, nb * rows, |r| W::generate(r, Mode::Random));
        let a: Vec<A> = generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random));
        let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
        let mut out = vec![0.0f32; rows];
        // In slices of 256 rows, as the engine calls it for one token.
        let slice = 256.min(rows);
        let slice_bytes = wb.len() / rows * slice;
        let report = |ns: f64, layout: &str| {
            console_log!(
                "{:<5} {rows:>6} x {n:<5} {:>6.2} ns/block ({:.1} GB/s){layout}",
                format!("{}", W::TYPE),
                ns / (nb * rows) as f64,
                wb.len() as f64 / ns
            )
        };
        let ns = ns_per_call(|| {
            for (part, o) in wb.chunks(slice_bytes).zip(out.chunks_mut(slice)) {
                gemm(W::TYPE, n, black_box(part), o.len(), black_box(ab), 1, o);
            }
            black_box(&out);
        });
        report(ns, "");
        // The same rows repacked (8-row groups), 32 groups per call as the engine calls it.
        if let Some(p) = tessera_quant::repack::RepackedMatrix::new(W::TYPE, n, rows, wb).unwrap() {
            let mut sums = Vec::new();
            if p.needs_act_sums() {
                tessera_quant::repack::act_block_sums(ab, &mut sums);
            }
            let mut tile = vec![0.0f32; 256];
            let groups = p.n_groups();
            let ns = ns_per_call(|| {
                for g0 in (0..groups).step_by(32) {
                    let g1 = (g0 + 32).min(groups);
                    p.gemm(g0..g1, ab, 1, &sums, &mut tile[..(g1 - g0) * 8]);
                    black_box(&tile);
                }
            });
            report(ns, " repacked");
        }
    }
    // The floor: one pass of 16-byte loads over 256 MB (no arithmetic but an OR).
    {
        use core::arch::wasm32::*;
        let big = vec![1u8; 256 << 20];
        let ns = ns_per_call(|| {
            let mut acc = u8x16_splat(0);
            for c in big.chunks_exact(64) {
                // SAFETY: c holds 64 bytes; v128_load has no alignment requirement.
                unsafe {
                    let p = c.as_ptr() as *const v128;
                    acc = v128_or(acc, v128_or(v128_load(p), v128_load(p.add(1))));
                    acc = v128_or(acc, v128_or(v128_load(p.add(2)), v128_load(p.add(3))));
                }
            }
            black_box(acc);
        });
        console_log!("streaming read: {:.1} GB/s", big.len() as f64 / ns);
    }
    console_log!("gemv ({}), one activation row", kernel_isa());
    // SmolLM2's layer matrices and its output matrix (49152 x 576), Gemma 3's output matrix
    // (262144 x 640, 178 MB: from memory, not cache).
    run(&Q8_0, 640, 262144);
    run(&Q4_1, 576, 196608);
    run(&Q4_1, 576, 1536);
    run(&Q4_1, 1536, 576);
    run(&Q8_0, 576, 49152);
    run(&Q5_0, 640, 2048);
    run(&Q4_K, 2048, 640);
    run(&Q6_K, 2048, 640);
}

/// A prompt's matrix products: 64 tokens × 256 weight rows (16-row slices, as the engine calls
/// `gemm` for long batches): ns per weight block per token.
#[wasm_bindgen_test]
#[ignore]
fn gemm_ns_per_block_for_a_prompt() {
    fn run<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, n: usize) {
        let (rows, acts, slice) = (256, 64, 16);
        let nb = n / pair.block_size;
        let mut rng = rng(9);
        let w: Vec<W> = generate_row(&mut rng, nb * rows, |r| W::generate(r, Mode::Random));
        let a: Vec<A> = generate_row(&mut rng, nb * acts, |r| A::generate(r, Mode::Random));
        let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
        let slice_bytes = wb.len() / rows * slice;
        let mut out = vec![0.0f32; slice * acts];
        let ns = ns_per_call(|| {
            for part in wb.chunks_exact(slice_bytes) {
                gemm(
                    W::TYPE,
                    n,
                    black_box(part),
                    slice,
                    black_box(ab),
                    acts,
                    &mut out,
                );
                black_box(&out);
            }
        });
        console_log!(
            "{:<5} {n:>5} {:>6.2} ns/block/token",
            format!("{}", W::TYPE),
            ns / (nb * rows * acts) as f64
        );
    }
    console_log!("gemm ({}), 256 rows x 64 tokens", kernel_isa());
    run(&Q4_0, 576);
    run(&Q4_1, 576);
    run(&Q5_0, 640);
    run(&Q8_0, 640);
    run(&Q4_K, 640);
    run(&Q6_K, 2048);
}

/// What one f32 FMA costs on wasm: `f32::mul_add` (software `fmaf`), the exact f64 emulation
/// `fma_f64::fma_f32` (bit-identical), and an unfused `a * b + c` for scale.
#[wasm_bindgen_test]
#[ignore]
fn fma_ns_per_op() {
    use tessera_quant::vec_dot::fma_f64::fma_f32;
    const LEN: usize = 4096;
    let a: Vec<f32> = (0..LEN).map(|i| 1.0 + (i % 97) as f32 * 1.0e-3).collect();
    let b: Vec<f32> = (0..LEN).map(|i| 0.5 - (i % 89) as f32 * 1.0e-3).collect();
    let mut c = vec![0.25f32; LEN];
    fn time(a: &[f32], b: &[f32], c: &mut [f32], f: impl Fn(f32, f32, f32) -> f32) -> f64 {
        ns_per_call(|| {
            for ((c, &a), &b) in c.iter_mut().zip(a).zip(b) {
                *c = f(a, b, *c) * 0.5;
            }
            black_box(&mut *c);
        }) / a.len() as f64
    }
    let mul_add = time(&a, &b, &mut c, |a, b, c| a.mul_add(b, c));
    let emulated = time(&a, &b, &mut c, fma_f32);
    let unfused = time(&a, &b, &mut c, |a, b, c| a * b + c);
    console_log!(
        "ns/op: f32::mul_add {mul_add:.2}, fma_f64::fma_f32 {emulated:.2}, a * b + c {unfused:.2}"
    );
}
