//! The conformance suite (llama.cpp test-backend-ops style) on the CUDA backend: the GPU
//! backends' cases (every op × weight type × shape; the attention and MoE ones shared from
//! `crates/backend-wgpu/tests/conformance/`, the others in `conformance/`, a copy of the
//! WebGPU harness's from before it became generic over an `under_test` module) run here on
//! CUDA and on the CPU backend, compared by normalized mean squared error; index outputs
//! (argmax) must match.
//!
//! Needs a CUDA device: without one every test is skipped with a message, except when
//! `TESSERA_REQUIRE_CUDA` is set (scripts/gpu-check.sh), where it fails. The tests of
//! `host_kernels` need none: they check kernel math compiled as host C++.
//!
//! Limits are the cases' own, except prefill matmuls (more than `DECODE_COLS` columns, unless
//! `TESSERA_CUDA_PREFILL=int`), which run through cuBLAS on f16 activations instead of ggml's quantized ones: the design's
//! quantized-matmul limit (5e-4) applies to them.

#[path = "../../backend-wgpu/tests/conformance/attention.rs"]
mod attention;
#[path = "conformance/data.rs"]
mod data;
#[path = "conformance/host_kernels.rs"]
mod host_kernels;
#[path = "../../backend-wgpu/tests/conformance/moe.rs"]
mod moe;
#[path = "conformance/ops.rs"]
mod ops;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use tessera_backend_cpu::CpuBackend;
use tessera_backend_cuda::ops::matmul::uses_gemm;
use tessera_backend_cuda::{libs, CudaBackend};
use tessera_core::backend::{Backend, Batch, KvLayerLayout, KvLayout, Segment};
use tessera_core::graph::{
    AttentionParams, Gating, Graph, GraphBuilder, MoeRouteParams, NodeId, RopeMode, RopeParams,
    Yarn,
};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::{EngineError, SequentialPool};
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

use data::*;
use ops::*;

/// The shared cases are async (the WebGPU harness awaits read-backs in the browser); here
/// nothing is ever pending, so polling once finishes them.
fn block_on<F: Future<Output = ()>>(f: F) {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(()) => {}
        Poll::Pending => panic!("a conformance case waited on nothing"),
    }
}

/// Whether a CUDA device is here; without one the test is skipped (or fails when required).
fn have_cuda() -> bool {
    let present =
        libs::driver_present() && tessera_backend_cuda::devices().is_ok_and(|d| !d.is_empty());
    assert!(
        present || std::env::var_os("TESSERA_REQUIRE_CUDA").is_none(),
        "TESSERA_REQUIRE_CUDA is set but no CUDA device answers: {:?}",
        tessera_backend_cuda::devices()
    );
    if !present {
        eprintln!("skipped: no CUDA device (CUDA: no driver, or no devices)");
    }
    present
}

macro_rules! conformance_tests {
    ($($name:ident => $case:expr;)*) => {$(
        #[test]
        fn $name() {
            if have_cuda() {
                block_on($case)
            }
        }
    )*};
}

include!("conformance/cases.rs");

/// A case as the shared files describe it (`weight_binding_cap` is WebGPU's; CUDA has none).
struct Case<'a> {
    name: String,
    weights: Vec<(String, Vec<usize>)>,
    kv: Option<KvLayout>,
    steps: Vec<Step>,
    shift: Option<(usize, usize, usize)>,
    limit: f64,
    build: &'a Build,
    #[allow(dead_code)]
    weight_binding_cap: Option<u64>,
    float_reference: bool,
}

fn cuda() -> CudaBackend {
    static SHOWN: OnceLock<()> = OnceLock::new();
    let b = CudaBackend::new(0).expect("CUDA device 0");
    SHOWN.get_or_init(|| eprintln!("cuda: {}", b.describe()));
    b
}

/// Runs a case on both backends; returns the worst NMSE over its steps.
fn run(case: &Case<'_>) -> f64 {
    let mut store = WeightStore::new(file());
    let mut ids = HashMap::new();
    for (name, ne) in &case.weights {
        ids.insert(name.clone(), store.require(name, ne).expect(name));
    }
    let mut cpu = CpuBackend::new(Arc::new(SequentialPool));
    cpu.set_reference_matmul(case.float_reference);
    let mut gpu = cuda();
    let kv = case.kv.clone().unwrap_or(KvLayout {
        n_ctx: 512,
        n_seq: 1,
        layers: vec![],
    });
    cpu.init_kv(&kv).unwrap();
    gpu.init_kv(&kv).unwrap();
    let mut worst = 0.0f64;
    for (i, st) in case.steps.iter().enumerate() {
        let graph = graph(&store, &ids, st, case.build);
        let n = graph.node(graph.output).n_elements();
        let segments = [Segment {
            seq: 0,
            pos0: st.pos0,
            len: st.tokens.len(),
        }];
        let batch = Batch {
            tokens: &st.tokens,
            segments: &segments,
            output_rows: &st.outputs,
        };
        let (mut want, mut got) = (vec![0.0f32; n], vec![f32::NAN; n]);
        assert!(cpu
            .compute(&graph, &batch, &store, &mut want)
            .unwrap()
            .is_ready());
        let done = gpu
            .compute(&graph, &batch, &store, &mut got)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(done.is_ready());
        assert!(
            got.iter().all(|v| v.is_finite()),
            "{}: non-finite output",
            case.name
        );
        worst = worst.max(nmse(&got, &want));
        let n_past = st.pos0 + st.tokens.len();
        if let Some((_, keep, discard)) = case.shift.filter(|s| s.0 == i) {
            cpu.kv_shift(&store, 0, n_past, keep, discard).unwrap();
            gpu.kv_shift(&store, 0, n_past, keep, discard).unwrap();
        }
    }
    eprintln!(
        "{:<48} nmse {worst:.3e} (limit {:.0e})",
        case.name,
        limit(case)
    );
    worst
}

/// The case's limit; prefill matmuls (cuBLAS on f16 activations) get the design's 5e-4.
fn limit(case: &Case<'_>) -> f64 {
    let prefill = case.steps.iter().any(|s| uses_gemm(s.tokens.len()));
    if case.name.starts_with("mul_mat ") && prefill {
        case.limit.max(5e-4)
    } else {
        case.limit
    }
}

async fn check(case: Case<'_>) {
    let e = run(&case);
    assert!(
        e <= limit(&case),
        "{}: NMSE {e:.3e} > {:.1e}",
        case.name,
        limit(&case)
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

/// The names the shared cases drive a backend by (the WebGPU harness's: a device, a backend
/// on it, and steps that may be pending in a browser; here there is one device and nothing
/// is ever pending).
struct Device;

async fn gpu() -> Device {
    Device
}

fn backend(_: Device) -> CudaBackend {
    cuda()
}

async fn gpu_compute(
    b: &mut CudaBackend,
    graph: &Graph,
    batch: &Batch<'_>,
    store: &WeightStore,
    out: &mut [f32],
) -> Result<(), EngineError> {
    assert!(b.compute(graph, batch, store, out)?.is_ready());
    Ok(())
}

async fn gpu_greedy(
    b: &mut CudaBackend,
    graph: &Graph,
    batch: &Batch<'_>,
    store: &WeightStore,
    ids: &mut [u32],
) -> Result<(), EngineError> {
    assert!(b.compute_greedy(graph, batch, store, ids)?.is_ready());
    Ok(())
}
