//! The packed integer dot product matmul (`mul_mat_q8.wgsl`, see `Gpu::int_dot_kernels`)
//! against the CPU backend with its weights in file layout (ggml's vec_dot kernels): every
//! weight type it reads, decode and batches, rows of one and of several blocks, a weight tall
//! enough for its 4-row decode shape. It runs ggml's arithmetic operation for operation, so
//! on a device with f64 (exact fused multiply-adds, `EXACT_FMA`) every output must have the
//! CPU's bits; elsewhere the NMSE limit of the f32 path's conformance cases holds (1e-6;
//! ggml's test-backend-ops allows 5e-4 for its matmuls).

use std::sync::Arc;

use tessera_backend_vulkan::Gpu;
use tessera_core::backend::{Batch, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::weights::WeightStore;
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

use crate::against_cpu;

const LIMIT: f64 = 1e-6;

fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.731 + seed).sin() * 2.0) + ((i % 7) as f32 - 3.0) * 0.1)
        .collect()
}

/// `ty` weights of `rows` × `k` against `n` activation rows: the Vulkan backend (`gpu`)
/// against the CPU, NMSE and whether every output has the CPU's bits.
fn compare(gpu: &Gpu, ty: GgmlType, k: usize, rows: usize, n: usize) -> (f64, bool) {
    let mut w = GgufWriter::new();
    let table: Vec<u8> = values(k * 64, 0.5)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    w.add_tensor("inp", &[k as u64, 64], GgmlType::F32, table)
        .unwrap();
    let rb = tessera_quant::row_bytes(ty, k).unwrap();
    let mut weights = vec![0u8; rb * rows];
    for (src, dst) in values(k * rows, 1.7).chunks(k).zip(weights.chunks_mut(rb)) {
        tessera_quant::quantize_row_ref(ty, src, dst).unwrap();
    }
    w.add_tensor("w", &[k as u64, rows as u64], ty, weights)
        .unwrap();
    let mut store = WeightStore::new(Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap()));
    let inp = store.require("inp", &[k, 64]).unwrap();
    let wt = store.require("w", &[k, rows]).unwrap();
    let mut b = GraphBuilder::new(&store, n, n);
    let x = b.get_rows(inp);
    let y = b.mul_mat(wt, x).unwrap();
    let graph = b.finish(y);
    let tokens: Vec<u32> = (0..n as u32).map(|i| (i * 7 + 3) % 64).collect();
    let segments = [Segment {
        seq: 0,
        pos0: 0,
        len: n,
    }];
    let rows_out: Vec<usize> = (0..n).collect();
    let batch = Batch {
        tokens: &tokens,
        segments: &segments,
        output_rows: &rows_out,
    };
    // ggml's own (vec_dot) arithmetic: the repacked kernels sum in llama.cpp's repack order.
    let (got, want) = against_cpu::outputs(gpu, &graph, &batch, &store, rows * n, false);
    let e = against_cpu::nmse(&got, &want);
    let same = got.iter().zip(&want).filter(|(g, w)| g == w).count();
    eprintln!(
        "int-dot {ty:?} k{k} m{rows} n{n}: nmse {e:.3e}, {same} of {} outputs with the CPU's bits",
        got.len()
    );
    (e, same == got.len())
}

#[test]
fn integer_dot_matmuls_match_the_cpu() {
    let mut gpu = Gpu::new(None).unwrap();
    if !gpu.device().features.int_dot {
        eprintln!(
            "no integer dot product on {}: nothing to check",
            gpu.device().name
        );
        return;
    }
    gpu.set_int_dot_kernels(true);
    let types = [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
    ];
    let exact = gpu.device().features.f64;
    let check = |ty, k, rows, n| {
        let (e, same) = compare(&gpu, ty, k, rows, n);
        assert!(e <= LIMIT, "{ty:?} k{k} m{rows} n{n}: nmse {e:.3e}");
        assert!(
            same || !exact,
            "{ty:?} k{k} m{rows} n{n}: not the CPU's bits"
        );
    };
    for ty in types {
        for n in [1, 5, 17] {
            check(ty, 256, 72, n);
        }
    }
    // Rows of several blocks (the float lanes accumulate across them).
    for ty in [GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q4_1] {
        check(ty, 1024, 72, 3);
    }
    // Tall weights: 4 rows per invocation in decode, partial row groups.
    for n in [1, 9] {
        check(GgmlType::Q4_K, 256, 16411, n);
    }
    // Every type and shape ran on the integer kernel (canonical names: defines sorted).
    let names = gpu.kernel_names();
    let exact = gpu.device().features.f64;
    for ty in types {
        let define = format!("W_{ty:?}");
        let mut shapes = vec![["NC", "NR"], ["NC=8", "NR"]];
        if ty == GgmlType::Q4_K {
            shapes.push(["NC", "NR=4"]);
        }
        for shape in shapes {
            let ran = names.iter().any(|n| {
                let words: Vec<&str> = n.split(' ').collect();
                n.starts_with("mul_mat_q8.wgsl:main ")
                    && words.contains(&define.as_str())
                    && shape.iter().all(|s| words.contains(s))
                    && (words.contains(&"EXACT_FMA") || !exact)
            });
            assert!(ran, "{shape:?} {define} did not run: {names:?}");
        }
    }
}

/// Whole models with the integer dot product matmuls: forced decoding (>= 99 % top-1 agreement
/// with the CPU) and every synthetic architecture against llama.cpp. Not the greedy fixtures:
/// the integer kernels move near ties there, which is why they are off by default
/// (docs/backend-vulkan.md).
mod models {
    tessera_conformance::gpu_model_tests!(crate::under_test::int_dot_model_backend;
        smollm2_forced_decoding_agreement_at_least_99_percent,
        gemma3_forced_decoding_agreement_at_least_99_percent,
    );
}

mod synth {
    tessera_conformance::gpu_synth_tests!(crate::under_test::int_dot_model_backend);
}
