//! The conformance cases (see the test root's docs), shared by the GPU backends: each
//! backend's test root declares `under_test` (its device, backend and read-back helpers) and
//! includes this file.

#[path = "attention.rs"]
mod attention;
#[path = "moe.rs"]
mod moe;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::{Backend, Batch, KvLayerLayout, KvLayout, Segment};
use tessera_core::graph::{
    AttentionParams, Graph, GraphBuilder, NodeId, RopeMode, RopeParams, Yarn,
};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::{EngineError, SequentialPool};
use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::shaders::{kernel_files, Define};

use crate::under_test::{backend, gpu, until_read_back, GpuBackend};
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

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

conformance_tests! {
    get_rows => get_rows_case();
    mul_mat => mul_mat_case();
    weights_split_across_bindings => weights_split_across_bindings_case();
    rms_norm => row_op_case("rms_norm", 1e-10, |b, a, _, _| Ok(b.rms_norm(a, 1e-6)));
    mul_weight => row_op_case("mul_weight", 1e-12, |b, a, _, n| b.mul_weight(a, n));
    add_weight => row_op_case("add_weight", 1e-12, |b, a, _, n| b.add_weight(a, n));
    add => row_op_case("add", 1e-12, |b, a, c, _| b.add(a, c));
    scale => row_op_case("scale", 1e-12, |b, a, _, _| Ok(b.scale(a, 0.37)));
    swiglu => row_op_case("swiglu", 1e-10, |b, a, c, _| b.swiglu(a, c));
    geglu => row_op_case("geglu", 1e-6, |b, a, c, _| b.geglu(a, c));
    softcap => row_op_case("softcap", 1e-10, |b, a, _, _| Ok(b.softcap(a, 2.5)));
    reglu => row_op_case("reglu", 1e-12, |b, a, c, _| b.reglu(a, c));
    swiglu_oai => row_op_case("swiglu_oai", 1e-10, |b, a, c, _| b.swiglu_oai(a, c, 1.702, 2.0));
    activation => activation_case();
    output_rows => row_op_case("output_rows", 0.0, |b, a, _, _| Ok(b.output_rows(a)));
    moe_route => moe::moe_route_case();
    mul_mat_id => moe::mul_mat_id_case();
    add_id => moe::add_id_case();
    moe_sum => moe::moe_sum_case();
    slice => row_op_case("slice", 0.0, |b, a, _, _| {
        let width = b.ne(a)[0];
        b.slice(a, width / 4, width / 2)
    });
    rope => rope_case();
    attention => attention::attention_case();
    attention_sliding_window_and_softcap => attention::attention_sliding_window_and_softcap_case();
    attention_sinks => attention::attention_sinks_case();
    attention_head_dim_256 => attention::attention_head_dim_256_case();
    attention_after_context_shift => attention::attention_after_context_shift_case();
    argmax_on_the_gpu_matches_the_logits => argmax_on_the_gpu_matches_the_logits_case();
    every_wgsl_file_compiles => every_wgsl_file_compiles_case();
    graphs_of_one_shape_get_their_own_recording =>
        graphs_of_one_shape_get_their_own_recording_case();
}

const WEIGHT_TYPES: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    // 17-byte blocks: every byte alignment of a block within a row.
    GgmlType::MXFP4,
];

/// NMSE limit of quantized matmuls (see the module docs).
const MUL_MAT_LIMIT: f64 = 1e-6;

/// Rows of every f32 input table (token ids index them).
const TABLE_ROWS: usize = 64;

fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn encode(ty: GgmlType, k: usize, data: &[f32]) -> Vec<u8> {
    match ty {
        GgmlType::F32 => bytemuck::cast_slice(data).to_vec(),
        GgmlType::F16 => data
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect(),
        _ => {
            let rb = tessera_quant::row_bytes(ty, k).unwrap();
            let mut out = vec![0u8; rb * data.len() / k];
            for (src, dst) in data.chunks(k).zip(out.chunks_mut(rb)) {
                tessera_quant::quantize_row_ref(ty, src, dst).unwrap();
            }
            out
        }
    }
}

/// The synthetic model file: `inp{k}` / `inp{k}b` f32 tables, `w.{ty}.{k}` weights of 72
/// rows, `emb.{ty}` tables of 40 rows of 256, `norm{k}` f32 vectors, `factors{n}` rope
/// frequency factors, `sinks{n}` attention sinks.
fn file() -> Arc<GgufFile> {
    static FILE: OnceLock<Arc<GgufFile>> = OnceLock::new();
    FILE.get_or_init(|| {
        let mut w = GgufWriter::new();
        let mut seed = 1;
        let mut add =
            |w: &mut GgufWriter, name: String, ty: GgmlType, k: usize, rows: usize, scale: f32| {
                seed += 1;
                let data = values(k * rows, seed, scale);
                let dims: Vec<u64> = if rows == 1 {
                    vec![k as u64]
                } else {
                    vec![k as u64, rows as u64]
                };
                w.add_tensor(name, &dims, ty, encode(ty, k, &data)).unwrap();
            };
        for k in [40, 64, 128, 256, 512, 576] {
            add(&mut w, format!("inp{k}"), GgmlType::F32, k, TABLE_ROWS, 3.0);
            add(
                &mut w,
                format!("inp{k}b"),
                GgmlType::F32,
                k,
                TABLE_ROWS,
                3.0,
            );
            add(&mut w, format!("norm{k}"), GgmlType::F32, k, 1, 1.5);
        }
        for ty in WEIGHT_TYPES {
            add(&mut w, format!("w.{ty:?}.256"), ty, 256, 72, 1.0);
            add(&mut w, format!("emb.{ty:?}"), ty, 256, 40, 1.0);
        }
        for ty in [GgmlType::Q8_0, GgmlType::Q4_K] {
            add(&mut w, format!("tall.{ty:?}"), ty, 256, 16411, 1.0);
        }
        add(&mut w, "w.F32.40".into(), GgmlType::F32, 40, 72, 1.0);
        for (i, ty) in moe::EXPERT_TYPES.into_iter().enumerate() {
            let (k, rows) = (256, moe::EXPERT_ROWS * moe::N_EXPERT);
            let data = values(k * rows, 1000 + i as u64, 1.0);
            let dims = [k as u64, moe::EXPERT_ROWS as u64, moe::N_EXPERT as u64];
            w.add_tensor(format!("experts.{ty:?}"), &dims, ty, encode(ty, k, &data))
                .unwrap();
        }
        // Rope frequency factors (divisors, 1 to ~9, as Llama 3's) for heads of 32 and 64.
        for n in [16, 32] {
            let f: Vec<f32> = (0..n)
                .map(|i| 1.0 + (i * i) as f32 / (n * 4) as f32)
                .collect();
            let bytes = encode(GgmlType::F32, n, &f);
            w.add_tensor(format!("factors{n}"), &[n as u64], GgmlType::F32, bytes)
                .unwrap();
        }
        add(&mut w, "w.F16.40".into(), GgmlType::F16, 40, 72, 1.0);
        // Attention sink logits, some above every score and some below.
        for n in [2, 4] {
            add(&mut w, format!("sinks{n}"), GgmlType::F32, n, 1, 20.0);
        }
        Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap())
    })
    .clone()
}

async fn gpu_compute(
    b: &mut GpuBackend,
    graph: &Graph,
    batch: &Batch<'_>,
    store: &WeightStore,
    out: &mut [f32],
) -> Result<(), EngineError> {
    until_read_back(b, |b| b.compute(graph, batch, store, out)).await
}

async fn gpu_greedy(
    b: &mut GpuBackend,
    graph: &Graph,
    batch: &Batch<'_>,
    store: &WeightStore,
    ids: &mut [u32],
) -> Result<(), EngineError> {
    until_read_back(b, |b| b.compute_greedy(graph, batch, store, ids)).await
}

/// One step of a case: tokens, first position, rows whose outputs are kept.
struct Step {
    tokens: Vec<u32>,
    pos0: usize,
    outputs: Vec<usize>,
}

fn step(tokens: &[u32], pos0: usize) -> Step {
    Step {
        tokens: tokens.to_vec(),
        pos0,
        outputs: (0..tokens.len()).collect(),
    }
}

type Build = dyn Fn(&mut GraphBuilder, &HashMap<String, WeightId>) -> Result<NodeId, EngineError>;

fn nmse(got: &[f32], want: &[f32]) -> f64 {
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        err += (g as f64 - w as f64).powi(2);
        norm += (w as f64).powi(2);
    }
    if norm == 0.0 {
        err
    } else {
        err / norm
    }
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

fn graph(store: &WeightStore, ids: &HashMap<String, WeightId>, st: &Step, build: &Build) -> Graph {
    let mut b = GraphBuilder::new(store, st.tokens.len(), st.outputs.len());
    let out = build(&mut b, ids).expect("graph");
    b.finish(out)
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

fn w(name: &str, ne: &[usize]) -> (String, Vec<usize>) {
    (name.to_string(), ne.to_vec())
}

async fn get_rows_case() {
    for ty in WEIGHT_TYPES {
        let name = format!("emb.{ty:?}");
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            Ok(b.get_rows(ids[&format!("emb.{ty:?}")]))
        };
        simple(
            format!("get_rows {ty:?}"),
            vec![w(&name, &[256, 40])],
            vec![step(&[3, 39, 0, 17, 3], 0)],
            1e-12,
            &build,
        )
        .await;
    }
}

/// The `ty` weight `weight` (256 × `rows`) times `n` activation rows of `inp256`.
async fn mul_mat_k256_case(ty: GgmlType, weight: String, rows: usize, n: usize) {
    let name = weight.clone();
    let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
        let x = b.get_rows(ids["inp256"]);
        b.mul_mat(ids[&name], x)
    };
    let tokens: Vec<u32> = (0..n as u32)
        .map(|i| (i * 7 + 3) % TABLE_ROWS as u32)
        .collect();
    simple(
        format!("mul_mat {ty:?} k256 m{rows} n{n}"),
        vec![w("inp256", &[256, TABLE_ROWS]), w(&weight, &[256, rows])],
        vec![step(&tokens, 0)],
        MUL_MAT_LIMIT,
        &build,
    )
    .await;
}

async fn mul_mat_case() {
    for ty in WEIGHT_TYPES {
        for n in [1usize, 5, 17] {
            mul_mat_k256_case(ty, format!("w.{ty:?}.256"), 72, n).await;
        }
    }
    // Weights as tall as an output projection (at least 16384 rows) take their own kernel
    // variants on CPU adapters (8 rows per invocation in decode, 16 columns per batch tile);
    // 16411 rows leave partial row groups, 17 tokens a partial column group.
    for ty in [GgmlType::Q8_0, GgmlType::Q4_K] {
        for n in [1usize, 17] {
            mul_mat_k256_case(ty, format!("tall.{ty:?}"), 16411, n).await;
        }
    }
    // Rows that are not a whole number of 32-element chunks (float types only).
    for ty in [GgmlType::F32, GgmlType::F16] {
        let wn = format!("w.{ty:?}.40");
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let x = b.get_rows(ids["inp40"]);
            b.mul_mat(ids[&format!("w.{ty:?}.40")], x)
        };
        simple(
            format!("mul_mat {ty:?} k40 m72 n3"),
            vec![w("inp40", &[40, TABLE_ROWS]), w(&wn, &[40, 72])],
            vec![step(&[1, 2, 3], 0)],
            1e-10,
            &build,
        )
        .await;
    }
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

/// An op on two f32 inputs `a`, `c` (rows of the `inp{k}` tables) and a norm weight `n`.
type Op2 = fn(&mut GraphBuilder, NodeId, NodeId, WeightId) -> Result<NodeId, EngineError>;

/// `op` on 4 tokens of rows of 64 and of 576, within NMSE `limit`.
async fn row_op_case(name: &str, limit: f64, op: Op2) {
    for k in [64usize, 576] {
        let inp = format!("inp{k}");
        let inpb = format!("inp{k}b");
        let norm = format!("norm{k}");
        let weights = vec![
            w(&inp, &[k, TABLE_ROWS]),
            w(&inpb, &[k, TABLE_ROWS]),
            w(&norm, &[k]),
        ];
        let (i1, i2, nn) = (inp.clone(), inpb.clone(), norm.clone());
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let a = b.get_rows(ids[&i1]);
            let c = b.get_rows(ids[&i2]);
            op(b, a, c, ids[&nn])
        };
        let mut st = vec![step(&[5, 9, 63, 0], 0)];
        if name == "output_rows" {
            st[0].outputs = vec![1, 3];
        }
        simple(format!("{name} k{k}"), weights, st, limit, &build).await;
    }
}

/// Every activation of a gateless feed-forward.
async fn activation_case() {
    use tessera_core::graph::Activation::{Gelu, Relu, Silu};
    row_op_case("activation silu", 1e-10, |b, a, _, _| {
        Ok(b.activation(a, Silu))
    })
    .await;
    row_op_case("activation gelu", 1e-6, |b, a, _, _| {
        Ok(b.activation(a, Gelu))
    })
    .await;
    row_op_case("activation relu", 0.0, |b, a, _, _| {
        Ok(b.activation(a, Relu))
    })
    .await;
}

async fn rope_case() {
    // (mode, rotated dims, frequency factors, YaRN with an attention factor)
    for (mode, n_dims, factors, yarn) in [
        (RopeMode::Normal, 64usize, false, false),
        (RopeMode::Normal, 32, false, false),
        (RopeMode::Neox, 64, false, false),
        (RopeMode::Neox, 32, false, false),
        (RopeMode::Normal, 64, true, false),
        (RopeMode::Neox, 32, true, false),
        (RopeMode::Normal, 64, false, true),
        (RopeMode::Neox, 32, true, true),
    ] {
        let factors_name = format!("factors{}", n_dims / 2);
        let mut weights = vec![w("inp256", &[256, TABLE_ROWS])];
        if factors {
            weights.push(w(&factors_name, &[n_dims / 2]));
        }
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let p = RopeParams {
                n_dims,
                mode,
                freq_base: 10000.0,
                freq_scale: if yarn { 0.25 } else { 1.0 },
                freq_factors: factors.then(|| ids[&factors_name]),
                attn_factor: if yarn { 1.19 } else { 1.0 },
                yarn: yarn.then(|| Yarn::new(n_dims, 64, 10000.0)),
            };
            let x = b.get_rows(ids["inp256"]);
            let x = b.reshape(x, [64, 4, b.n_tokens, 1])?;
            b.rope(x, p)
        };
        simple(
            format!("rope {mode:?} n_dims {n_dims} factors {factors} yarn {yarn}"),
            weights,
            vec![step(&[1, 2, 3], 0), step(&[4, 5], 300)],
            // cos/sin precision differs between adapters (SwiftShader: ~1e-8).
            1e-7,
            &build,
        )
        .await;
    }
}

async fn argmax_on_the_gpu_matches_the_logits_case() {
    let build = |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
        let x = b.get_rows(ids["inp256"]);
        let y = b.mul_mat(ids["w.Q4_K.256"], x)?;
        Ok(b.output_rows(y))
    };
    let mut store = WeightStore::new(file());
    let mut ids = HashMap::new();
    for (name, ne) in [w("inp256", &[256, TABLE_ROWS]), w("w.Q4_K.256", &[256, 72])] {
        ids.insert(name.clone(), store.require(&name, &ne).unwrap());
    }
    let mut gpu_backend = backend(gpu().await);
    let mut cpu = CpuBackend::new(Arc::new(SequentialPool));
    cpu.set_reference_matmul(true);
    let kv = KvLayout {
        n_ctx: 64,
        n_seq: 1,
        layers: vec![],
    };
    gpu_backend.init_kv(&kv).unwrap();
    cpu.init_kv(&kv).unwrap();
    for tokens in [vec![4u32], vec![1, 2, 3, 60, 61]] {
        let st = step(&tokens, 0);
        let g = graph(&store, &ids, &st, &build);
        let batch = Batch {
            tokens: &st.tokens,
            segments: &[Segment {
                seq: 0,
                pos0: 0,
                len: st.tokens.len(),
            }],
            output_rows: &st.outputs,
        };
        let mut logits = vec![0.0; 72 * tokens.len()];
        let mut want = vec![0.0; 72 * tokens.len()];
        gpu_compute(&mut gpu_backend, &g, &batch, &store, &mut logits)
            .await
            .unwrap();
        assert!(cpu
            .compute(&g, &batch, &store, &mut want)
            .unwrap()
            .is_ready());
        let mut got = vec![u32::MAX; tokens.len()];
        gpu_greedy(&mut gpu_backend, &g, &batch, &store, &mut got)
            .await
            .unwrap();
        for r in 0..tokens.len() {
            let row = &logits[r * 72..(r + 1) * 72];
            let best = (0..72).fold(0, |b, i| if row[i] > row[b] { i } else { b });
            assert_eq!(got[r] as usize, best, "row {r}");
            let cpu_row = &want[r * 72..(r + 1) * 72];
            let cpu_best = (0..72).fold(0, |b, i| if cpu_row[i] > cpu_row[b] { i } else { b });
            assert_eq!(got[r] as usize, cpu_best, "row {r} vs CPU");
        }
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
        // Variants the builders request (the Vulkan backend has no others, see
        // `tessera_kernels::variants`): Q4_0 is read without W_ALIGNED on every device.
        "mul_mat.wgsl" => vec![("main", vec![("W_Q4_0", 1), ("WG", 64), ("NR", 1)])],
        "mul_mat_q8.wgsl" => vec![(
            "main",
            vec![("W_Q4_K", 1), ("WG", 64), ("NR", 1), ("NC", 8)],
        )],
        "output_rows.wgsl" | "rms_norm.wgsl" | "rope.wgsl" => vec![("main", vec![])],
        "elementwise.wgsl" => vec![("main", vec![("OP_GELU", 1)])],
        "get_rows.wgsl" => vec![("main", vec![("W_Q8_0", 1)])],
        "moe_route.wgsl" => vec![("main", vec![("GATING_SOFTMAX", 1), ("NORMALIZE", 1)])],
        "mul_mat_id.wgsl" => vec![("main", vec![("W_Q4_K", 1), ("N_X_SHARED", 1)])],
        "quantize.wgsl" => vec![
            ("main", vec![("ACT_Q8_0", 1)]),
            ("main", vec![("ACT_Q8_K", 1), ("PACK", 1)]),
        ],
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
