//! The KV cache on the GPU (`B`: the API's buffer): per layer, K and V buffers of f16 pairs packed in u32
//! (`[position][kv head][dim]`, slot index == position, like the CPU cache).

use tessera_core::backend::{KvLayerLayout, KvLayout};

use crate::error::GpuError;

pub struct LayerKv<B> {
    pub layout: KvLayerLayout,
    pub k: B,
    pub v: B,
}

impl<B> LayerKv<B> {
    /// u32 words per position.
    pub fn k_pairs(&self) -> usize {
        self.layout.n_head_kv * self.layout.head_dim_k / 2
    }
    pub fn v_pairs(&self) -> usize {
        self.layout.n_head_kv * self.layout.head_dim_v / 2
    }
}

pub struct GpuKv<B> {
    pub n_ctx: usize,
    pub layers: Vec<LayerKv<B>>,
}

impl<B> Default for GpuKv<B> {
    fn default() -> Self {
        GpuKv {
            n_ctx: 0,
            layers: Vec::new(),
        }
    }
}

impl<B> GpuKv<B> {
    /// The cache for `layout`, each layer's K and V made by `buffer(name, bytes)` (whose
    /// errors are the backend's, `E`).
    pub fn with_buffers<E: From<GpuError>>(
        layout: &KvLayout,
        mut buffer: impl FnMut(&str, u64) -> Result<B, E>,
    ) -> Result<GpuKv<B>, E> {
        let mut layers = Vec::with_capacity(layout.layers.len());
        for (il, l) in layout.layers.iter().enumerate() {
            if l.head_dim_k % 2 != 0 || l.head_dim_v % 2 != 0 {
                return Err(GpuError::Unsupported(format!(
                    "odd head size {}/{}",
                    l.head_dim_k, l.head_dim_v
                ))
                .into());
            }
            let k_bytes = (layout.n_ctx as u64) * (l.n_head_kv * l.head_dim_k * 2) as u64;
            let v_bytes = (layout.n_ctx as u64) * (l.n_head_kv * l.head_dim_v * 2) as u64;
            layers.push(LayerKv {
                layout: *l,
                k: buffer(&format!("kv cache K{il}"), k_bytes)?,
                v: buffer(&format!("kv cache V{il}"), v_bytes)?,
            });
        }
        Ok(GpuKv {
            n_ctx: layout.n_ctx,
            layers,
        })
    }
}
