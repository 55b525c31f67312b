//! The CPU backend reuses its buffer plan only for an equal graph: two graphs with the same
//! batch shape and node count but different liveness need different plans.

use std::sync::Arc;

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::{Backend, Batch, KvLayout, Segment};
use tessera_core::graph::{Graph, GraphBuilder, NodeId};
use tessera_core::weights::WeightStore;
use tessera_core::SequentialPool;
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

const WIDTH: usize = 4;

fn store() -> WeightStore {
    let mut w = GgufWriter::new();
    let table: Vec<f32> = (0..WIDTH * 8).map(|i| i as f32 * 0.25 - 1.0).collect();
    w.add_tensor(
        "emb",
        &[WIDTH as u64, 8],
        GgmlType::F32,
        bytemuck::cast_slice(&table).to_vec(),
    )
    .unwrap();
    let file = Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap());
    WeightStore::new(file)
}

/// `x = emb[tokens]`, `s = 2x`, then `combine(x, s)`, then the output rows: four nodes either
/// way, but `x` dies at `s` in one graph and lives on in the other.
fn graph(
    store: &mut WeightStore,
    combine: impl Fn(&mut GraphBuilder, NodeId, NodeId) -> NodeId,
) -> Graph {
    let table = store.require("emb", &[WIDTH, 8]).unwrap();
    let mut b = GraphBuilder::new(store, 2, 2);
    let x = b.get_rows(table);
    let s = b.scale(x, 2.0);
    let c = combine(&mut b, x, s);
    let out = b.output_rows(c);
    b.finish(out)
}

fn run(backend: &mut CpuBackend, g: &Graph, store: &WeightStore) -> Vec<f32> {
    let batch = Batch {
        tokens: &[3, 5],
        segments: &[Segment {
            seq: 0,
            pos0: 0,
            len: 2,
        }],
        output_rows: &[0, 1],
    };
    let mut out = vec![0.0; WIDTH * 2];
    assert!(backend
        .compute(g, &batch, store, &mut out)
        .unwrap()
        .is_ready());
    out
}

fn backend() -> CpuBackend {
    let mut b = CpuBackend::new(Arc::new(SequentialPool));
    b.init_kv(&KvLayout {
        n_ctx: 8,
        n_seq: 1,
        layers: vec![],
    })
    .unwrap();
    b
}

#[test]
fn a_graph_of_the_same_shape_gets_its_own_plan() {
    let mut store = store();
    let chained = graph(&mut store, |b, _, s| b.scale(s, 3.0));
    let reusing_x = graph(&mut store, |b, x, s| b.add(x, s).unwrap());
    let mut shared = backend();
    run(&mut shared, &chained, &store);
    let got = run(&mut shared, &reusing_x, &store);
    let want = run(&mut backend(), &reusing_x, &store);
    assert_eq!(got, want);
    // x + 2x of the table rows 3 and 5.
    let row = |t: usize| (0..WIDTH).map(move |i| 3.0 * ((t * WIDTH + i) as f32 * 0.25 - 1.0));
    assert_eq!(want, row(3).chain(row(5)).collect::<Vec<_>>());
}
