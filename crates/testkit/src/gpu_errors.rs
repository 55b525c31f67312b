//! Inputs of the GPU backends' device-error tests (`tests/suite/device_errors.rs` of each):
//! a one-table weight store and a one-layer KV layout whose size is the caller's to choose.

use std::sync::Arc;

use tessera_core::backend::{KvLayerLayout, KvLayout};
use tessera_core::graph::{RopeMode, RopeParams};
use tessera_core::weights::WeightStore;
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

/// A store over a GGUF holding `emb`: an f32 table of 8 rows of 64.
pub fn emb_store() -> WeightStore {
    let mut w = GgufWriter::new();
    let data: Vec<u8> = (0..64 * 8)
        .flat_map(|i| (i as f32 * 0.1).sin().to_le_bytes())
        .collect();
    w.add_tensor("emb", &[64, 8], GgmlType::F32, data).unwrap();
    WeightStore::new(Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap()))
}

/// One layer of 8 KV heads of 256: 4 KiB per position for K and for V.
pub fn one_layer_kv(n_ctx: usize) -> KvLayout {
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
