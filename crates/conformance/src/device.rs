//! Cases of a GPU backend's own machinery rather than of one op: weights split across
//! bindings, every kernel file compiling, recordings replayed only for their own graph.

use std::collections::HashMap;

use tessera_core::backend::{Backend, Batch, KvLayout, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::GgmlType;

use crate::data::{file, MUL_MAT_LIMIT, TABLE_ROWS};
use crate::harness::{compute, simple, step, w};
use crate::{CompilesKernels, Define, SplitsWeightBindings, UnderTest};

/// A 4 KiB cap splits the 72-row weights and 40-row tables into many bindings.
pub async fn weights_split_across_bindings<U: SplitsWeightBindings>(under_test: &U) {
    let capped = under_test.with_weight_binding_cap(4096);
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
        simple(
            &capped,
            format!("split bindings {ty:?}"),
            vec![w(&en, &[256, 40]), w(&wn, &[256, 72])],
            vec![step(&[0, 39, 20, 7], 0)],
            MUL_MAT_LIMIT,
            &build,
        )
        .await;
    }
}

/// Entry points and defines of one variant of each kernel file (every file of `shaders/wgsl/`
/// but the includes): a new kernel file needs its variants here.
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
        // Every op of the table: each is its own kernel once preprocessed.
        "elementwise.wgsl" => tessera_kernels::variants::ELEMENTWISE_OPS
            .iter()
            .map(|&op| ("main", vec![(op, 1)]))
            .collect(),
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

/// One variant of every kernel file compiles on the device.
pub async fn every_kernel_file_compiles<U: CompilesKernels>(under_test: &U) {
    let mut n = 0;
    for family in under_test.kernel_files() {
        for (entry, defines) in kernel_variants(family) {
            if let Err(e) = under_test.compile(family, entry, defines) {
                panic!("{family} {entry}: {e}");
            }
            n += 1;
        }
    }
    assert!(n > 0, "no kernel files found");
}

/// Two graphs with the same nodes but different outputs (so the same batch shape and node
/// count): the second must not replay the first's recording.
pub async fn graphs_of_one_shape_get_their_own_recording<U: UnderTest>(under_test: &U) {
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
    let mut shared = under_test.backend();
    shared.init_kv(&kv).unwrap();
    let mut fresh = under_test.backend();
    fresh.init_kv(&kv).unwrap();
    let (mut got, mut want) = (vec![0.0; 128], vec![0.0; 128]);
    compute::<U>(&mut shared, &rows, &batch, &store, &mut got)
        .await
        .unwrap();
    compute::<U>(&mut shared, &scaled, &batch, &store, &mut got)
        .await
        .unwrap();
    compute::<U>(&mut fresh, &scaled, &batch, &store, &mut want)
        .await
        .unwrap();
    assert_eq!(got, want);
}
