//! The KV cache on the device: per layer, K and V as f16 (`[position][kv head][dim]`, slot
//! index == position, like the CPU cache), written by `kv_store` and read by `flash_attn`.

use tessera_core::backend::{KvLayerLayout, KvLayout};

use crate::device::{DevBuf, Gpu, Queue};
use crate::error::CudaError;

pub struct LayerKv {
    pub layout: KvLayerLayout,
    pub k: DevBuf,
    pub v: DevBuf,
}

impl LayerKv {
    /// f16 values per position: K of every kv head.
    pub fn k_per_pos(&self) -> usize {
        self.layout.n_head_kv * self.layout.head_dim_k
    }

    pub fn v_per_pos(&self) -> usize {
        self.layout.n_head_kv * self.layout.head_dim_v
    }
}

#[derive(Default)]
pub struct CudaKv {
    pub n_ctx: usize,
    pub layers: Vec<LayerKv>,
}

impl CudaKv {
    pub fn new(gpu: &Gpu, layout: &KvLayout) -> Result<CudaKv, CudaError> {
        let mut layers = Vec::with_capacity(layout.layers.len());
        for l in &layout.layers {
            if l.head_dim_k % 2 != 0 || l.head_dim_v % 2 != 0 {
                return Err(CudaError::Unsupported(format!(
                    "odd head size {}/{}",
                    l.head_dim_k, l.head_dim_v
                )));
            }
            layers.push(LayerKv {
                layout: *l,
                k: gpu.alloc(layout.n_ctx * l.n_head_kv * l.head_dim_k * 2)?,
                v: gpu.alloc(layout.n_ctx * l.n_head_kv * l.head_dim_v * 2)?,
            });
        }
        Ok(CudaKv {
            n_ctx: layout.n_ctx,
            layers,
        })
    }
}
