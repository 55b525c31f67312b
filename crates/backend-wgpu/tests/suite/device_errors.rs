//! Device loss and failed allocations become typed errors (never a panic or a hang), and a
//! backend can be created again afterwards.

use tessera_backend_wgpu::{WgpuBackend, WgpuError};
use tessera_core::backend::{Backend, Batch, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::weights::WeightStore;
use tessera_core::EngineError;

use tessera_testkit::gpu_errors::{emb_store as store, one_layer_kv as layout};

fn wgpu_error(e: EngineError) -> WgpuError {
    match e {
        EngineError::Backend(b) => *b.downcast::<WgpuError>().expect("a WgpuError"),
        other => panic!("expected a backend error, got {other}"),
    }
}

#[test]
fn a_lost_device_is_a_typed_error_and_a_new_backend_works() {
    let mut s = store();
    let emb = s.require("emb", &[64, 8]).unwrap();
    let run = |backend: &mut WgpuBackend, s: &WeightStore| -> Result<Vec<f32>, EngineError> {
        let mut b = GraphBuilder::new(s, 2, 2);
        let x = b.get_rows(emb);
        let g = b.finish(x);
        let mut out = vec![0.0; 128];
        let batch = Batch {
            tokens: &[1, 7],
            segments: &[Segment {
                seq: 0,
                pos0: 0,
                len: 2,
            }],
            output_rows: &[0, 1],
        };
        let progress = backend.compute(&g, &batch, s, &mut out)?;
        assert!(progress.is_ready(), "synchronous read-back");
        Ok(out)
    };
    let mut backend = WgpuBackend::new().unwrap();
    backend.init_kv(&layout(16)).unwrap();
    let before = run(&mut backend, &s).unwrap();
    backend.gpu().destroy();
    let err = run(&mut backend, &s).expect_err("a destroyed device cannot compute");
    let err = wgpu_error(err);
    assert!(
        matches!(err, WgpuError::DeviceLost(_) | WgpuError::Validation(_)),
        "{err}"
    );
    let mut again = WgpuBackend::new().unwrap();
    again.init_kv(&layout(16)).unwrap();
    assert_eq!(run(&mut again, &s).unwrap(), before);
}

#[test]
fn an_impossible_allocation_is_a_typed_error() {
    let mut backend = WgpuBackend::new().unwrap();
    // 2^22 positions x 8 heads x 256 dims x 2 bytes = 16 GiB for one layer's keys.
    let err = wgpu_error(backend.init_kv(&layout(1 << 22)).unwrap_err());
    assert!(
        matches!(
            err,
            WgpuError::BindingTooLarge { .. } | WgpuError::OutOfMemory { .. }
        ),
        "{err}"
    );
    // The backend still works with a sensible size.
    backend.init_kv(&layout(64)).unwrap();
}
