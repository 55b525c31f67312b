//! The subgroup variants (off by default, see `Gpu::subgroup_kernels`) against the CPU
//! backend: rms_norm over rows of several widths, with the subgroup reduction on.

use std::sync::Arc;

use tessera_backend_cpu::CpuBackend;
use tessera_backend_vulkan::{Gpu, VulkanBackend};
use tessera_core::backend::{Backend, Batch, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::weights::WeightStore;
use tessera_core::SequentialPool;
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};
use tessera_testkit::gpu_errors::one_layer_kv;

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
        let (mut got, mut want) = (vec![0.0f32; 3 * width], vec![0.0f32; 3 * width]);
        let mut vk = VulkanBackend::with_gpu(gpu.clone());
        let mut cpu = CpuBackend::new(Arc::new(SequentialPool));
        vk.init_kv(&one_layer_kv(8)).unwrap();
        cpu.init_kv(&one_layer_kv(8)).unwrap();
        assert!(vk
            .compute(&graph, &batch, &store, &mut got)
            .unwrap()
            .is_ready());
        assert!(cpu
            .compute(&graph, &batch, &store, &mut want)
            .unwrap()
            .is_ready());
        let err: f64 = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - *w as f64).powi(2))
            .sum();
        let norm: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
        assert!(err / norm < 1e-10, "width {width}: NMSE {:.3e}", err / norm);
    }
}
