//! The subgroup variants (off by default, see `Gpu::subgroup_kernels`) against the CPU
//! backend: rms_norm over rows of several widths, with the subgroup reduction on.

use std::sync::Arc;

use tessera_backend_vulkan::Gpu;
use tessera_core::backend::{Batch, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::weights::WeightStore;
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

use crate::against_cpu;

#[test]
fn rms_norm_with_subgroup_reduction_matches_the_cpu() {
    let mut gpu = Gpu::new(None).unwrap();
    if !gpu.device().features.subgroup_arithmetic {
        eprintln!(
            "no subgroup arithmetic on {}: nothing to check",
            gpu.device().name
        );
        return;
    }
    gpu.set_subgroup_kernels(true);
    for width in [64usize, 576, 640, 2048] {
        let mut w = GgufWriter::new();
        let data: Vec<u8> = (0..width * 4)
            .flat_map(|i| ((i as f32 * 0.37).sin() * 3.0).to_le_bytes())
            .collect();
        w.add_tensor("t", &[width as u64, 4], GgmlType::F32, data)
            .unwrap();
        let mut store = WeightStore::new(Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap()));
        let table = store.require("t", &[width, 4]).unwrap();
        let mut b = GraphBuilder::new(&store, 3, 3);
        let x = b.get_rows(table);
        let y = b.rms_norm(x, 1e-6);
        let graph = b.finish(y);
        let segments = [Segment {
            seq: 0,
            pos0: 0,
            len: 3,
        }];
        let batch = Batch {
            tokens: &[2, 0, 3],
            segments: &segments,
            output_rows: &[0, 1, 2],
        };
        let (got, want) = against_cpu::outputs(&gpu, &graph, &batch, &store, 3 * width, true);
        let e = against_cpu::nmse(&got, &want);
        assert!(e < 1e-10, "width {width}: NMSE {e:.3e}");
    }
}
