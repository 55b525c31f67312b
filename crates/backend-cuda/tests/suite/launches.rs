//! Every kernel launch the backend makes, checked without a GPU: the model graphs (SmolLM2,
//! Gemma 3) and a graph with every op run through `StepGraph::queue_nodes` on a recording
//! [`Queue`], and each recorded launch must name a kernel of its file's PTX (NVRTC) with
//! arguments of the sizes its parameters have, and a grid within CUDA's limits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use tessera_backend_cuda::device::{Arg, DevBuf, Queue};
use tessera_backend_cuda::kernels;
use tessera_backend_cuda::kv::{CudaKv, LayerKv};
use tessera_backend_cuda::ops::{self, attention};
use tessera_backend_cuda::step::StepGraph;
use tessera_backend_cuda::weights::{source_of, CudaWeight, CudaWeights};
use tessera_backend_cuda::{libs, CudaError};
use tessera_core::backend::{Backend, Batch, KvLayerLayout, KvLayout};
use tessera_core::graph::{
    Activation, AttentionParams, Gating, Graph, GraphBuilder, MoeRouteParams,
};
use tessera_core::graph::{RopeMode, RopeParams, Yarn};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::{Context, ContextParams, EngineError};
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

struct Launch {
    file: &'static str,
    name: String,
    args: Vec<usize>,
    grid: (u32, u32, u32),
    block: u32,
}

/// Records launches; allocations get distinct fake addresses.
#[derive(Clone, Default)]
struct Recorder {
    launches: Arc<Mutex<Vec<Launch>>>,
    next: Arc<AtomicU64>,
}

impl Queue for Recorder {
    fn alloc(&self, bytes: usize) -> Result<DevBuf, CudaError> {
        let at = self.next.fetch_add(bytes as u64 + 256, Ordering::Relaxed);
        Ok(DevBuf::unbacked(0x1000 + at, bytes))
    }

    fn launch(
        &mut self,
        file: &'static str,
        name: &str,
        grid: (u32, u32, u32),
        block: u32,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        let args = args
            .iter()
            .map(|a| match a {
                Arg::U32(_) | Arg::F32(_) => 4,
                Arg::Ptr(_) => 8,
                Arg::Struct(b) => b.len(),
            })
            .collect();
        self.launches.lock().unwrap().push(Launch {
            file,
            name: name.into(),
            args,
            grid,
            block,
        });
        Ok(())
    }

    fn copy(&self, _: u64, _: u64, _: usize) -> Result<(), CudaError> {
        Ok(())
    }

    fn gemm_f16(
        &mut self,
        _: usize,
        _: usize,
        _: usize,
        _: u64,
        _: u64,
        _: u64,
    ) -> Result<(), CudaError> {
        Ok(())
    }
}

/// The engine's [`Backend`] over a [`Recorder`]: every step's kernels recorded, zeros out.
struct RecordingBackend {
    rec: Recorder,
    weights: Option<CudaWeights>,
    kv: CudaKv,
}

impl RecordingBackend {
    fn weights(&mut self, store: &WeightStore) -> &CudaWeights {
        let rec = self.rec.clone();
        self.weights.get_or_insert_with(|| {
            let weights = (0..store.len())
                .map(|i| {
                    let id = WeightId(i as u32);
                    let d = store.desc(id);
                    let bytes = store.bytes(id).len();
                    CudaWeight {
                        name: store.get(id).name.clone(),
                        ty: d.ty,
                        k: d.ne[0],
                        n_rows: d.n_rows(),
                        row_bytes: bytes / d.n_rows().max(1),
                        buf: rec.alloc(bytes).unwrap(),
                    }
                })
                .collect();
            CudaWeights {
                source: source_of(store),
                weights,
                bytes: 0,
            }
        })
    }
}

impl Backend for RecordingBackend {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        let layers = layout
            .layers
            .iter()
            .map(|l| LayerKv {
                layout: *l,
                k: self
                    .rec
                    .alloc(layout.n_ctx * l.n_head_kv * l.head_dim_k * 2)
                    .unwrap(),
                v: self
                    .rec
                    .alloc(layout.n_ctx * l.n_head_kv * l.head_dim_v * 2)
                    .unwrap(),
            })
            .collect();
        self.kv = CudaKv {
            n_ctx: layout.n_ctx,
            layers,
        };
        Ok(())
    }

    fn kv_n_ctx(&self) -> usize {
        self.kv.n_ctx
    }

    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        store: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        self.check_batch(graph, batch, store)?;
        let mut rec = self.rec.clone();
        self.weights(store);
        let weights = self.weights.as_ref().unwrap();
        let mut step = StepGraph::new(&rec, graph, weights)?;
        step.queue_nodes(&mut rec, weights, &self.kv)?;
        out.fill(0.0);
        Ok(Poll::Ready(()))
    }

    fn kv_shift_checked(
        &mut self,
        store: &WeightStore,
        _: usize,
        n_past: usize,
        keep: usize,
        discard: usize,
    ) -> Result<(), EngineError> {
        let mut rec = self.rec.clone();
        self.weights(store);
        let weights = self.weights.as_ref().unwrap();
        let scratch = rec.alloc(1 << 20)?;
        for layer in &self.kv.layers {
            let factors = match layer.layout.rope.freq_factors {
                Some(f) => weights.get(f).f32_vector()?,
                None => 0,
            };
            attention::shift(
                &mut rec,
                layer,
                factors,
                scratch.ptr,
                keep,
                discard,
                n_past - keep - discard,
            )?;
        }
        Ok(())
    }
}

/// Every kernel of every file with its parameters' sizes (compute_90 PTX), by name.
fn kernel_params() -> Option<HashMap<String, (String, Vec<usize>)>> {
    if !libs::nvrtc_present() {
        assert!(
            std::env::var_os("TESSERA_REQUIRE_NVRTC").is_none(),
            "NVRTC is required here"
        );
        eprintln!("skipped: NVRTC not found");
        return None;
    }
    let mut all = HashMap::new();
    for file in kernels::kernel_files() {
        let ptx = kernels::compile(file, "compute_90").unwrap().to_src();
        for (name, params) in kernels::entry_params(&ptx) {
            all.insert(name, (file.to_string(), params));
        }
    }
    Some(all)
}

/// Each launch names a kernel of its file with parameters of the argument sizes; returns the
/// kernel names launched.
fn check(launches: &[Launch], params: &HashMap<String, (String, Vec<usize>)>) -> Vec<String> {
    assert!(!launches.is_empty());
    let mut names = Vec::new();
    for l in launches {
        let (file, sizes) = params
            .get(&l.name)
            .unwrap_or_else(|| panic!("no kernel {} (in {})", l.name, l.file));
        assert_eq!(file, l.file, "{}", l.name);
        assert_eq!(&l.args, sizes, "arguments of {}", l.name);
        assert!(
            l.grid.0 >= 1 && l.grid.1 >= 1 && l.grid.2 >= 1,
            "{}: empty grid {:?}",
            l.name,
            l.grid
        );
        assert!(
            l.grid.1 <= 65535 && l.grid.2 <= 65535,
            "{}: grid {:?}",
            l.name,
            l.grid
        );
        assert!(
            l.block >= 32 && l.block <= 1024 && l.block % 32 == 0,
            "{}: block {}",
            l.name,
            l.block
        );
        names.push(l.name.clone());
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn model_steps_launch_existing_kernels_with_matching_arguments() {
    let Some(params) = kernel_params() else {
        return;
    };
    for file in [tessera_testkit::SMOLLM2, tessera_testkit::GEMMA3] {
        let model = tessera_testkit::load_model(file);
        let rec = Recorder::default();
        let backend = RecordingBackend {
            rec: rec.clone(),
            weights: None,
            kv: CudaKv::default(),
        };
        let mut ctx = Context::new(
            model.clone(),
            ContextParams {
                n_ctx: 64,
                n_batch: 32,
            },
            Box::new(backend),
        )
        .unwrap();
        // A prefill (cuBLAS path), a decode step, a small batch (matvec columns), all logits.
        ctx.decode(
            &[
                1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
            ],
            false,
        )
        .unwrap();
        ctx.decode(&[21], false).unwrap();
        ctx.decode(&[22, 23, 24], true).unwrap();
        let names = check(&rec.launches.lock().unwrap(), &params);
        eprintln!("{file}: {}", names.join(" "));
    }
}

/// A graph with every op (and every option: window, softcap, sinks, rope factors and YaRN,
/// the MoE ops), decode and prefill, plus the sampling kernels and a context shift.
#[test]
fn every_op_launches_existing_kernels_with_matching_arguments() {
    let Some(params) = kernel_params() else {
        return;
    };
    let store = synthetic_store();
    let rec = Recorder::default();
    let mut backend = RecordingBackend {
        rec: rec.clone(),
        weights: None,
        kv: CudaKv::default(),
    };
    let rope = rope_params(&store);
    let layout = KvLayout {
        n_ctx: 64,
        n_seq: 1,
        layers: vec![KvLayerLayout {
            n_head_kv: 2,
            head_dim_k: 64,
            head_dim_v: 64,
            rope,
        }],
    };
    backend.init_kv(&layout).unwrap();
    for t in [1usize, 12] {
        let graph = every_op_graph(&store, t);
        let tokens: Vec<u32> = (0..t as u32).collect();
        let rows: Vec<usize> = (0..t).collect();
        let segments = [tessera_core::backend::Segment {
            seq: 0,
            pos0: 3,
            len: t,
        }];
        let batch = Batch {
            tokens: &tokens,
            segments: &segments,
            output_rows: &rows,
        };
        let mut out = vec![0.0; graph.node(graph.output).n_elements()];
        assert!(backend
            .compute(&graph, &batch, &store, &mut out)
            .unwrap()
            .is_ready());
    }
    backend.kv_shift(&store, 0, 20, 4, 6).unwrap();
    let mut r = rec.clone();
    let buf = r.alloc(1 << 16).unwrap();
    ops::argmax(&mut r, buf.ptr, buf.ptr, 1000, 3).unwrap();
    ops::sample_chain(&mut r, buf.ptr, 1000, 2, buf.ptr, buf.ptr, buf.ptr).unwrap();
    let names = check(&rec.launches.lock().unwrap(), &params);
    for want in [
        "moe_route",
        "mul_mat_id_mxfp4",
        "add_id",
        "moe_sum",
        "flash_attn",
        "kv_shift",
        "swiglu_oai",
        "sample_chain",
        "dequant_f16_q4_k",
        "matvec_f16",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} not launched: {names:?}"
        );
    }
}

fn rope_params(store: &WeightStore) -> RopeParams {
    RopeParams {
        n_dims: 64,
        mode: RopeMode::Neox,
        freq_base: 10000.0,
        freq_scale: 0.5,
        freq_factors: Some(store_id(store, "factors")),
        attn_factor: 1.0,
        yarn: Some(Yarn::new(64, 32, 10000.0)),
    }
}

fn store_id(store: &WeightStore, name: &str) -> WeightId {
    (0..store.len())
        .map(|i| WeightId(i as u32))
        .find(|&id| store.get(id).name == name)
        .unwrap()
}

/// Zero-filled tensors (nothing runs): a table of rows of 256, weights of several types,
/// MXFP4 experts with their biases, a norm, rope factors, sinks.
fn synthetic_store() -> WeightStore {
    let mut w = GgufWriter::new();
    let tensors: [(&str, &[u64], GgmlType); 10] = [
        ("tab", &[256, 64], GgmlType::F32),
        ("norm", &[256], GgmlType::F32),
        ("wq", &[256, 256], GgmlType::Q4_K),
        ("wk", &[256, 128], GgmlType::Q8_0),
        ("wv", &[256, 128], GgmlType::Q4_1),
        ("wo", &[256, 256], GgmlType::F16),
        ("experts", &[256, 64, 4], GgmlType::MXFP4),
        ("ebias", &[64, 4], GgmlType::F32),
        ("factors", &[32], GgmlType::F32),
        ("sinks", &[4], GgmlType::F32),
    ];
    let mut store_names = Vec::new();
    for (name, ne, ty) in tensors {
        let rows: u64 = ne[1..].iter().product();
        let bytes = tessera_quant::row_bytes(ty, ne[0] as usize).unwrap() * rows as usize;
        w.add_tensor(name.to_string(), ne, ty, vec![0u8; bytes])
            .unwrap();
        store_names.push((name, ne.iter().map(|&n| n as usize).collect::<Vec<_>>()));
    }
    let mut store = WeightStore::new(Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap()));
    for (name, ne) in store_names {
        store.require(name, &ne).unwrap();
    }
    store
}

fn every_op_graph(store: &WeightStore, t: usize) -> Graph {
    let id = |n| store_id(store, n);
    let mut b = GraphBuilder::new(store, t, t);
    let build = |b: &mut GraphBuilder| -> Result<_, EngineError> {
        let x = b.get_rows(id("tab"));
        let n = b.rms_norm(x, 1e-6);
        let n = b.mul_weight(n, id("norm"))?;
        let n = b.add_weight(n, id("norm"))?;
        let q = b.mul_mat(id("wq"), n)?;
        let q = b.reshape(q, [64, 4, t, 1])?;
        let q = b.rope(q, rope_params(store))?;
        let k = b.mul_mat(id("wk"), n)?;
        let k = b.reshape(k, [64, 2, t, 1])?;
        let k = b.rope(k, rope_params(store))?;
        let v = b.mul_mat(id("wv"), n)?;
        let v = b.reshape(v, [64, 2, t, 1])?;
        let p = AttentionParams {
            layer: 0,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 64,
            scale: 0.125,
            window: Some(8),
            softcap: Some(30.0),
            sinks: Some(id("sinks")),
        };
        let a = b.attention(q, k, v, p)?;
        let a = b.mul_mat(id("wo"), a)?;
        let a = b.add(a, x)?;
        let a = b.scale(a, 0.5);
        let a = b.softcap(a, 10.0);
        let g = b.swiglu(a, x)?;
        let g = b.geglu(g, x)?;
        let g = b.reglu(g, x)?;
        let g = b.swiglu_oai(g, x, 1.702, 7.0)?;
        let g = b.activation(g, Activation::Silu);
        let logits = b.slice(g, 8, 4)?;
        let route = MoeRouteParams {
            n_used: 2,
            gating: Gating::SoftmaxAfterTopK,
            selection_bias: None,
            normalize: true,
            scale: 1.0,
        };
        let route = b.moe_route(logits, route)?;
        let xe = b.reshape(g, [256, 1, t, 1])?;
        let e = b.mul_mat_id(id("experts"), xe, route)?;
        let e = b.add_id(e, id("ebias"), route)?;
        let m = b.moe_sum(e, route)?;
        Ok(b.output_rows(m))
    };
    let out = build(&mut b).expect("graph");
    b.finish(out)
}
