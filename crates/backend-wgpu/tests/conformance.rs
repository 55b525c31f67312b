//! Conformance suite in the style of llama.cpp's test-backend-ops: every op of the llama and
//! gemma3 graphs, for every weight type and several shapes, run on the WebGPU backend and on
//! the CPU backend and compared by normalized mean squared error with a limit per op; index
//! outputs (argmax) must match. Matmuls round activations like ggml (Q8_0 / Q8_K / f16) on
//! both; the GPU's Q8_1 differs only in the f16 rounding of ggml's per-block sum term
//! (NMSE ~2e-7), hence the quantized-matmul limit of 1e-6.
//!
//! Inputs come from a synthetic GGUF file: f32 tables looked up with GetRows (the graphs'
//! only source op) and weights of each type quantized with the `quant` crate.
//!
//! The harness is async so that the same cases run natively (`cargo test`, blocking on each
//! test) and in headless Chromium through wasm-bindgen-test (`scripts/test-wasm-crate.sh`),
//! where the backend reads back asynchronously and each step is awaited as the npm package's
//! worker does.

#[path = "conformance/attention.rs"]
mod attention;
#[path = "conformance/data.rs"]
mod data;
#[path = "conformance/moe.rs"]
mod moe;
#[path = "conformance/ops.rs"]
mod ops;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::task::Poll;

use tessera_backend_cpu::CpuBackend;
use tessera_backend_wgpu::pipelines::PipelineKey;
use tessera_backend_wgpu::shaders::{kernel_files, Define};
use tessera_backend_wgpu::{Gpu, WgpuBackend};
use tessera_core::backend::{Backend, Batch, KvLayerLayout, KvLayout, Segment};
use tessera_core::graph::{
    AttentionParams, Graph, GraphBuilder, NodeId, RopeMode, RopeParams, Yarn,
};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::{EngineError, SequentialPool};
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

use data::*;
use ops::*;

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

/// Each test runs natively under `cargo test` (blocking on the async case) and in the browser
/// under wasm-bindgen-test.
macro_rules! conformance_tests {
    ($($name:ident => $case:expr;)*) => {$(
        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            pollster::block_on($case)
        }
        #[cfg(target_arch = "wasm32")]
        #[wasm_bindgen_test::wasm_bindgen_test]
        async fn $name() {
            $case.await
        }
    )*};
}

include!("conformance/cases.rs");

// The cases of this backend only.
conformance_tests! {
    weights_split_across_bindings => weights_split_across_bindings_case();
    every_wgsl_file_compiles => every_wgsl_file_compiles_case();
    graphs_of_one_shape_get_their_own_recording =>
        graphs_of_one_shape_get_their_own_recording_case();
}

async fn gpu() -> Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    if let Some(g) = GPU.get() {
        return g.clone();
    }
    let gpu = Gpu::new()
        .await
        .expect("a WebGPU adapter (lavapipe in CI, SwiftShader in Chromium)");
    eprintln!("adapter: {}", gpu.describe());
    // Tests starting at once may each create one; the first stored is shared from then on.
    GPU.get_or_init(|| gpu).clone()
}

/// A backend on `g`; in the browser with asynchronous read-back (the only kind there).
fn backend(g: Gpu) -> WgpuBackend {
    #[allow(unused_mut)]
    let mut b = WgpuBackend::with_gpu(g);
    #[cfg(target_arch = "wasm32")]
    b.set_async_read_back(true);
    b
}

/// Runs `call` on the GPU backend, awaiting the read-back and repeating the call while the
/// step is pending (the browser), as the npm package's worker does.
async fn until_read_back(
    b: &mut WgpuBackend,
    mut call: impl FnMut(&mut WgpuBackend) -> Result<Poll<()>, EngineError>,
) -> Result<(), EngineError> {
    loop {
        match call(b)? {
            Poll::Pending => b.gpu().read_back_signal().ready().await,
            Poll::Ready(()) => return Ok(()),
        }
    }
}

async fn gpu_compute(
    b: &mut WgpuBackend,
    graph: &Graph,
    batch: &Batch<'_>,
    store: &WeightStore,
    out: &mut [f32],
) -> Result<(), EngineError> {
    until_read_back(b, |b| b.compute(graph, batch, store, out)).await
}

async fn gpu_greedy(
    b: &mut WgpuBackend,
    graph: &Graph,
    batch: &Batch<'_>,
    store: &WeightStore,
    ids: &mut [u32],
) -> Result<(), EngineError> {
    until_read_back(b, |b| b.compute_greedy(graph, batch, store, ids)).await
}

struct Case<'a> {
    name: String,
    weights: Vec<(String, Vec<usize>)>,
    kv: Option<KvLayout>,
    steps: Vec<Step>,
    /// Between steps: (after step i, keep, discard) context shifts.
    shift: Option<(usize, usize, usize)>,
    limit: f64,
    build: &'a Build,
    weight_binding_cap: Option<u64>,
    /// Compare with the CPU's float reference matmul (f32 activations) instead of its
    /// quantized-activation path.
    float_reference: bool,
}

/// Runs a case on both backends; returns the worst NMSE over its steps.
async fn run(case: &Case<'_>) -> f64 {
    let mut store = WeightStore::new(file());
    let mut ids = HashMap::new();
    for (name, ne) in &case.weights {
        ids.insert(name.clone(), store.require(name, ne).expect(name));
    }
    let mut cpu = CpuBackend::new(Arc::new(SequentialPool));
    cpu.set_reference_matmul(case.float_reference);
    let mut g = gpu().await;
    g.set_weight_binding_cap(case.weight_binding_cap);
    // Where the adapter has shader-f16 the kernels take their f16 variants; the f32 path runs
    // alongside and must give the same bits.
    let mut f32_path = g.f16_kernels().then(|| {
        let mut g32 = g.clone();
        g32.set_f16_kernels(false);
        backend(g32)
    });
    let mut wgpu = backend(g);
    let kv = case.kv.clone().unwrap_or(KvLayout {
        n_ctx: 512,
        n_seq: 1,
        layers: vec![],
    });
    cpu.init_kv(&kv).unwrap();
    wgpu.init_kv(&kv).unwrap();
    if let Some(b) = &mut f32_path {
        b.init_kv(&kv).unwrap();
    }
    let mut worst = 0.0f64;
    for (i, st) in case.steps.iter().enumerate() {
        let graph = graph(&store, &ids, st, case.build);
        let n = graph.node(graph.output).n_elements();
        let batch = Batch {
            tokens: &st.tokens,
            segments: &[Segment {
                seq: 0,
                pos0: st.pos0,
                len: st.tokens.len(),
            }],
            output_rows: &st.outputs,
        };
        let (mut want, mut got) = (vec![0.0f32; n], vec![f32::NAN; n]);
        assert!(cpu
            .compute(&graph, &batch, &store, &mut want)
            .unwrap()
            .is_ready());
        gpu_compute(&mut wgpu, &graph, &batch, &store, &mut got)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(
            got.iter().all(|v| v.is_finite()),
            "{}: non-finite output",
            case.name
        );
        worst = worst.max(nmse(&got, &want));
        if let Some(b) = &mut f32_path {
            let mut got32 = vec![f32::NAN; n];
            gpu_compute(b, &graph, &batch, &store, &mut got32)
                .await
                .unwrap();
            let same = got
                .iter()
                .zip(&got32)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{}: the f16 kernels differ from the f32 path",
                case.name
            );
        }
        let n_past = st.pos0 + st.tokens.len();
        if let Some((after, keep, discard)) = case.shift {
            if after == i {
                cpu.kv_shift(&store, 0, n_past, keep, discard).unwrap();
                wgpu.kv_shift(&store, 0, n_past, keep, discard).unwrap();
                if let Some(b) = &mut f32_path {
                    b.kv_shift(&store, 0, n_past, keep, discard).unwrap();
                }
            }
        }
    }
    eprintln!(
        "{:<48} nmse {worst:.3e} (limit {:.0e})",
        case.name, case.limit
    );
    worst
}

async fn check(case: Case<'_>) {
    let e = run(&case).await;
    assert!(
        e <= case.limit,
        "{}: NMSE {e:.3e} > {:.1e}",
        case.name,
        case.limit
    );
}

async fn simple(
    name: String,
    weights: Vec<(String, Vec<usize>)>,
    steps: Vec<Step>,
    limit: f64,
    build: &Build,
) {
    check(Case {
        name,
        weights,
        kv: None,
        steps,
        shift: None,
        limit,
        build,
        weight_binding_cap: None,
        float_reference: false,
    })
    .await;
}

async fn weights_split_across_bindings_case() {
    // A 4 KiB cap splits the 72-row weights and 40-row tables into many bindings.
    for ty in [
        GgmlType::Q4_1,
        GgmlType::Q6_K,
        GgmlType::MXFP4,
        GgmlType::F32,
    ] {
        let wn = format!("w.{ty:?}.256");
        let en = format!("emb.{ty:?}");
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let x = b.get_rows(ids[&format!("emb.{ty:?}")]);
            b.mul_mat(ids[&format!("w.{ty:?}.256")], x)
        };
        check(Case {
            name: format!("split bindings {ty:?}"),
            weights: vec![w(&en, &[256, 40]), w(&wn, &[256, 72])],
            kv: None,
            steps: vec![step(&[0, 39, 20, 7], 0)],
            shift: None,
            limit: MUL_MAT_LIMIT,
            build: &build,
            weight_binding_cap: Some(4096),
            float_reference: false,
        })
        .await;
    }
}

/// Entry points and defines of one variant of each kernel file (every file build.rs found in
/// `shaders/wgsl/` but the includes): a new kernel file needs its variants here.
fn kernel_variants(file: &str) -> Vec<(&'static str, Vec<Define>)> {
    match file {
        "attention.wgsl" => vec![
            ("main", vec![("WG", 64), ("HD", 64), ("PPT", 1)]),
            (
                "main",
                vec![("WG", 64), ("HD", 64), ("PPT", 1), ("SINKS", 1)],
            ),
        ],
        "kv.wgsl" => vec![("store", vec![("STORE", 1)]), ("shift", vec![("SHIFT", 1)])],
        "mul_mat.wgsl" => vec![("main", vec![("W_Q4_K", 1), ("WG", 64), ("NR", 1)])],
        "add.wgsl" | "add_weight.wgsl" | "geglu.wgsl" | "mul_weight.wgsl" | "output_rows.wgsl"
        | "slice.wgsl" | "rms_norm.wgsl" | "rope.wgsl" | "scale.wgsl" | "softcap.wgsl"
        | "swiglu.wgsl" | "moe_sum.wgsl" | "reglu.wgsl" | "swiglu_oai.wgsl" | "add_id.wgsl" => {
            vec![("main", vec![])]
        }
        "get_rows.wgsl" => vec![("main", vec![("W_Q8_0", 1)])],
        "activation.wgsl" => vec![("main", vec![("ACT_GELU", 1)])],
        "moe_route.wgsl" => vec![("main", vec![("GATING_SOFTMAX", 1), ("NORMALIZE", 1)])],
        "mul_mat_id.wgsl" => vec![("main", vec![("W_Q4_K", 1), ("N_X_SHARED", 1)])],
        "quantize.wgsl" => vec![("main", vec![("ACT_Q8_0", 1)])],
        "sample.wgsl" => vec![("argmax", vec![])],
        "sample_chain.wgsl" => vec![("sample", vec![])],
        other => panic!("no variant of {other} to compile: add one to kernel_variants"),
    }
}

async fn every_wgsl_file_compiles_case() {
    let g = gpu().await;
    let mut n = 0;
    for family in kernel_files() {
        for (entry, defines) in kernel_variants(family) {
            let key = PipelineKey {
                family,
                entry,
                defines,
            };
            if let Err(e) = g.pipeline(key) {
                panic!("{family} {entry}: {e}");
            }
            n += 1;
        }
    }
    assert!(n > 0, "no kernel files found");
}

/// Two graphs with the same nodes but different outputs (so the same batch shape and node
/// count): the second must not replay the first's recording.
async fn graphs_of_one_shape_get_their_own_recording_case() {
    let mut store = WeightStore::new(file());
    let table = store.require("inp64", &[64, TABLE_ROWS]).unwrap();
    let graph_with_output = |pick_scaled: bool| {
        let mut b = GraphBuilder::new(&store, 2, 2);
        let x = b.get_rows(table);
        let scaled = b.scale(x, 2.0);
        let rows = b.output_rows(x);
        b.finish(if pick_scaled { scaled } else { rows })
    };
    let (rows, scaled) = (graph_with_output(false), graph_with_output(true));
    let batch = Batch {
        tokens: &[3, 5],
        segments: &[Segment {
            seq: 0,
            pos0: 0,
            len: 2,
        }],
        output_rows: &[0, 1],
    };
    let kv = KvLayout {
        n_ctx: 8,
        n_seq: 1,
        layers: vec![],
    };
    let mut shared = backend(gpu().await);
    shared.init_kv(&kv).unwrap();
    let mut fresh = backend(gpu().await);
    fresh.init_kv(&kv).unwrap();
    let (mut got, mut want) = (vec![0.0; 128], vec![0.0; 128]);
    gpu_compute(&mut shared, &rows, &batch, &store, &mut got)
        .await
        .unwrap();
    gpu_compute(&mut shared, &scaled, &batch, &store, &mut got)
        .await
        .unwrap();
    gpu_compute(&mut fresh, &scaled, &batch, &store, &mut want)
        .await
        .unwrap();
    assert_eq!(got, want);
}
