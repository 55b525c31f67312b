//! How a case runs: its graph built on the synthetic file's weights, each step computed on
//! the CPU backend and on the backend under test, the worst NMSE over the steps against the
//! case's limit.

use std::collections::HashMap;
use std::sync::Arc;

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::{Backend, Batch, KvLayout, Segment};
use tessera_core::graph::{Graph, GraphBuilder, NodeId};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::{EngineError, SequentialPool};

use crate::data::file;
use crate::UnderTest;

/// One step of a case: tokens, first position, rows whose outputs are kept.
pub struct Step {
    pub tokens: Vec<u32>,
    pub pos0: usize,
    pub outputs: Vec<usize>,
}

/// A step of `tokens` at positions `pos0..`, every row kept.
pub fn step(tokens: &[u32], pos0: usize) -> Step {
    Step {
        tokens: tokens.to_vec(),
        pos0,
        outputs: (0..tokens.len()).collect(),
    }
}

/// Builds a case's graph from the weights it named.
pub type Build =
    dyn Fn(&mut GraphBuilder, &HashMap<String, WeightId>) -> Result<NodeId, EngineError>;

/// A case: its graph, the weights it reads, its steps and its NMSE limit.
pub struct Case<'a> {
    /// Begins with the op under test (`mul_mat F16 k40 m72 n3`): see [`Case::op`].
    pub name: String,
    /// Tensors of the synthetic file and their shapes, registered in this order.
    pub weights: Vec<(String, Vec<usize>)>,
    pub kv: Option<KvLayout>,
    pub steps: Vec<Step>,
    /// Between steps: (after step i, keep, discard) context shifts.
    pub shift: Option<(usize, usize, usize)>,
    pub limit: f64,
    pub build: &'a Build,
}

impl<'a> Case<'a> {
    /// A case without a KV layout of its own or a context shift.
    pub fn new(
        name: String,
        weights: Vec<(String, Vec<usize>)>,
        steps: Vec<Step>,
        limit: f64,
        build: &'a Build,
    ) -> Case<'a> {
        Case {
            name,
            weights,
            kv: None,
            steps,
            shift: None,
            limit,
            build,
        }
    }

    /// The op under test: the first word of the name.
    pub fn op(&self) -> &str {
        self.name.split(' ').next().unwrap_or_default()
    }
}

/// A weight of the synthetic file and its shape.
pub fn w(name: &str, ne: &[usize]) -> (String, Vec<usize>) {
    (name.to_string(), ne.to_vec())
}

/// Normalized mean squared error of `got` against `want` (the squared error where `want` is
/// all zeros).
pub fn nmse(got: &[f32], want: &[f32]) -> f64 {
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

/// The graph `build` makes for step `st`.
pub fn graph(
    store: &WeightStore,
    ids: &HashMap<String, WeightId>,
    st: &Step,
    build: &Build,
) -> Graph {
    let mut b = GraphBuilder::new(store, st.tokens.len(), st.outputs.len());
    let out = build(&mut b, ids).expect("graph");
    b.finish(out)
}

/// The batch of one step (sequence 0).
pub fn batch<'s>(st: &'s Step, segments: &'s [Segment; 1]) -> Batch<'s> {
    Batch {
        tokens: &st.tokens,
        segments,
        output_rows: &st.outputs,
    }
}

/// The one segment of `st`.
pub fn segment(st: &Step) -> [Segment; 1] {
    [Segment {
        seq: 0,
        pos0: st.pos0,
        len: st.tokens.len(),
    }]
}

/// The CPU backend the cases compare with (ggml's quantized-activation matmuls).
pub fn cpu_backend() -> CpuBackend {
    CpuBackend::new(Arc::new(SequentialPool))
}

/// `graph`'s output on `backend` under test.
pub async fn compute<U: UnderTest>(
    backend: &mut U::Backend,
    graph: &Graph,
    batch: &Batch<'_>,
    store: &WeightStore,
    out: &mut [f32],
) -> Result<(), EngineError> {
    U::until_ready(backend, |b| b.compute(graph, batch, store, out)).await
}

/// Runs a case on both backends; returns the worst NMSE over its steps.
async fn run<U: UnderTest>(under_test: &U, case: &Case<'_>) -> f64 {
    let mut store = WeightStore::new(file());
    let mut ids = HashMap::new();
    for (name, ne) in &case.weights {
        ids.insert(name.clone(), store.require(name, ne).expect(name));
    }
    let mut cpu = cpu_backend();
    let mut tested = under_test.backend();
    let mut same_bits = under_test.same_bits_backends();
    let kv = case.kv.clone().unwrap_or(KvLayout {
        n_ctx: 512,
        n_seq: 1,
        layers: vec![],
    });
    cpu.init_kv(&kv).unwrap();
    tested.init_kv(&kv).unwrap();
    for b in &mut same_bits {
        b.init_kv(&kv).unwrap();
    }
    let mut worst = 0.0f64;
    for (i, st) in case.steps.iter().enumerate() {
        let graph = graph(&store, &ids, st, case.build);
        let n = graph.node(graph.output).n_elements();
        let segments = segment(st);
        let batch = batch(st, &segments);
        let (mut want, mut got) = (vec![0.0f32; n], vec![f32::NAN; n]);
        assert!(cpu
            .compute(&graph, &batch, &store, &mut want)
            .unwrap()
            .is_ready());
        compute::<U>(&mut tested, &graph, &batch, &store, &mut got)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(
            got.iter().all(|v| v.is_finite()),
            "{}: non-finite output",
            case.name
        );
        worst = worst.max(nmse(&got, &want));
        for b in &mut same_bits {
            let mut other = vec![f32::NAN; n];
            compute::<U>(b, &graph, &batch, &store, &mut other)
                .await
                .unwrap();
            let same = got
                .iter()
                .zip(&other)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{}: the kernel paths of one device differ (f16 against f32)",
                case.name
            );
        }
        let n_past = st.pos0 + st.tokens.len();
        if let Some((_, keep, discard)) = case.shift.filter(|s| s.0 == i) {
            cpu.kv_shift(&store, 0, n_past, keep, discard).unwrap();
            tested.kv_shift(&store, 0, n_past, keep, discard).unwrap();
            for b in &mut same_bits {
                b.kv_shift(&store, 0, n_past, keep, discard).unwrap();
            }
        }
    }
    eprintln!(
        "{:<48} nmse {worst:.3e} (limit {:.0e})",
        case.name,
        under_test.limit(case)
    );
    worst
}

/// Runs `case`; fails above the backend's limit for it.
pub async fn check<U: UnderTest>(under_test: &U, case: Case<'_>) {
    let e = run(under_test, &case).await;
    let limit = under_test.limit(&case);
    assert!(e <= limit, "{}: NMSE {e:.3e} > {limit:.1e}", case.name);
}

/// [`check`] of a [`Case::new`].
pub async fn simple<U: UnderTest>(
    under_test: &U,
    name: String,
    weights: Vec<(String, Vec<usize>)>,
    steps: Vec<Step>,
    limit: f64,
    build: &Build,
) {
    check(under_test, Case::new(name, weights, steps, limit, build)).await;
}
