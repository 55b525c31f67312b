//! Device loss and failed allocations become typed errors (never a panic or a hang), and a
//! backend can be created again afterwards. A loss is simulated (`Gpu::mark_lost`, what a
//! call answering `VK_ERROR_DEVICE_LOST` does); out-of-memory is real (a KV cache larger than
//! the device's memory).

use tessera_backend_vulkan::{VulkanBackend, VulkanError};
use tessera_core::backend::{Backend, Batch, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::weights::WeightStore;
use tessera_core::EngineError;

use tessera_testkit::gpu_errors::{emb_store as store, one_layer_kv as layout};

fn vulkan_error(e: EngineError) -> VulkanError {
    match e {
        EngineError::Backend(b) => *b.downcast::<VulkanError>().expect("a VulkanError"),
        other => panic!("expected a backend error, got {other}"),
    }
}

fn run(backend: &mut VulkanBackend, s: &WeightStore) -> Result<Vec<f32>, EngineError> {
    let emb = tessera_core::weights::WeightId(0);
    let mut b = GraphBuilder::new(s, 2, 2);
    let x = b.get_rows(emb);
    let g = b.finish(x);
    let mut out = vec![0.0; 128];
    let segments = [Segment {
        seq: 0,
        pos0: 0,
        len: 2,
    }];
    let batch = Batch {
        tokens: &[1, 7],
        segments: &segments,
        output_rows: &[0, 1],
    };
    assert!(backend.compute(&g, &batch, s, &mut out)?.is_ready());
    Ok(out)
}

#[test]
fn a_lost_device_is_a_typed_error_and_a_new_backend_works() {
    let mut s = store();
    s.require("emb", &[64, 8]).unwrap();
    let mut backend = VulkanBackend::new(None).unwrap();
    backend.init_kv(&layout(16)).unwrap();
    let before = run(&mut backend, &s).unwrap();
    backend.gpu().mark_lost();
    let err = vulkan_error(run(&mut backend, &s).unwrap_err());
    assert!(matches!(err, VulkanError::DeviceLost(_)), "{err}");
    let mut again = VulkanBackend::new(None).unwrap();
    again.init_kv(&layout(16)).unwrap();
    assert_eq!(run(&mut again, &s).unwrap(), before);
}

#[test]
fn a_kv_cache_larger_than_the_device_is_out_of_memory() {
    let mut backend = VulkanBackend::new(None).unwrap();
    // 4 KiB per position and tensor: 64 GiB each, past any software device's heap.
    let err = vulkan_error(backend.init_kv(&layout(16 << 20)).unwrap_err());
    assert!(matches!(err, VulkanError::Allocation { .. }), "{err}");
    // The backend still works at a size that fits.
    backend.init_kv(&layout(16)).unwrap();
}
