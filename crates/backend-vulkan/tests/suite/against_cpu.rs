//! One graph on the Vulkan backend and on the CPU backend, for the tests of the Vulkan-only
//! kernel variants (`subgroups`, `int_dot`): both outputs, and their NMSE.

use std::sync::Arc;

use tessera_backend_cpu::CpuBackend;
use tessera_backend_vulkan::{Gpu, VulkanBackend};
use tessera_core::backend::{Backend, Batch};
use tessera_core::graph::Graph;
use tessera_core::weights::WeightStore;
use tessera_core::SequentialPool;
use tessera_testkit::gpu_errors::one_layer_kv;

/// (Vulkan's, the CPU's) `n_out` output floats. `repack`: the CPU's repacked kernels (its
/// default), else ggml's vec_dot kernels on the file layout.
pub fn outputs(
    gpu: &Gpu,
    graph: &Graph,
    batch: &Batch,
    store: &WeightStore,
    n_out: usize,
    repack: bool,
) -> (Vec<f32>, Vec<f32>) {
    let (mut got, mut want) = (vec![0.0f32; n_out], vec![0.0f32; n_out]);
    let mut vk = VulkanBackend::with_gpu(gpu.clone());
    let mut cpu = CpuBackend::new(Arc::new(SequentialPool));
    cpu.set_repack(repack);
    vk.init_kv(&one_layer_kv(32)).unwrap();
    cpu.init_kv(&one_layer_kv(32)).unwrap();
    assert!(vk
        .compute(graph, batch, store, &mut got)
        .unwrap()
        .is_ready());
    assert!(cpu
        .compute(graph, batch, store, &mut want)
        .unwrap()
        .is_ready());
    (got, want)
}

/// Normalized mean squared error of `got` against `want`.
pub fn nmse(got: &[f32], want: &[f32]) -> f64 {
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - *w as f64).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
    err / norm
}
