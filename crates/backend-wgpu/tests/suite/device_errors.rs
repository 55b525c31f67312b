//! Device loss and failed allocations become typed errors (never a panic or a hang), and a
//! backend can be created again afterwards.

use std::sync::Arc;

use tessera_backend_wgpu::{WgpuBackend, WgpuError};
use tessera_core::backend::{Backend, Batch, KvLayerLayout, KvLayout, Segment};
use tessera_core::graph::{GraphBuilder, RopeMode, RopeParams};
use tessera_core::weights::WeightStore;
use tessera_core::EngineError;
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

fn store() -> WeightStore {
    let mut w = GgufWriter::new();
    let data: Vec<f32> = (0..64 * 8).map(|i| (i as f32 * 0.1).sin()).collect();
    w.add_tensor(
        "emb",
        &[64, 8],
        GgmlType::F32,
        bytemuck::cast_slice(&data).to_vec(),
    )
    .unwrap();
    let file = Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap());
    WeightStore::new(file)
}

fn layout(n_ctx: usize) -> KvLayout {
    KvLayout {
        n_ctx,
        n_seq: 1,
        layers: vec![KvLayerLayout {
            n_head_kv: 8,
            head_dim_k: 256,
            head_dim_v: 256,
            rope: RopeParams {
                n_dims: 256,
                mode: RopeMode::Neox,
                freq_base: 1e4,
                freq_scale: 1.0,
                freq_factors: None,
                attn_factor: 1.0,
                yarn: None,
            },
        }],
    }
}

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
