//! The CPU KV cache: per layer, keys and values in f16, one slot per position
//! (`[position][kv head][head_dim]`), so slot index == position.

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::ops::rope::{rope_cache, rotate_head};
use tessera_core::backend::{KvLayerLayout, KvLayout};
use tessera_core::error::EngineError;
use tessera_core::weights::WeightId;

pub struct LayerKv {
    pub layout: KvLayerLayout,
    pub k: Vec<f16>,
    pub v: Vec<f16>,
}

impl LayerKv {
    pub fn k_stride(&self) -> usize {
        self.layout.n_head_kv * self.layout.head_dim_k
    }
    pub fn v_stride(&self) -> usize {
        self.layout.n_head_kv * self.layout.head_dim_v
    }
}

#[derive(Default)]
pub struct KvCache {
    pub n_ctx: usize,
    pub layers: Vec<LayerKv>,
}

impl KvCache {
    pub fn new(layout: &KvLayout) -> Result<KvCache, EngineError> {
        let mut layers = Vec::with_capacity(layout.layers.len());
        for l in &layout.layers {
            let k_len = layout
                .n_ctx
                .checked_mul(l.n_head_kv * l.head_dim_k)
                .ok_or_else(|| EngineError::InvalidArgument("KV cache too large".into()))?;
            let v_len = layout.n_ctx * l.n_head_kv * l.head_dim_v;
            layers.push(LayerKv {
                layout: *l,
                k: vec![f16::ZERO; k_len],
                v: vec![f16::ZERO; v_len],
            });
        }
        Ok(KvCache {
            n_ctx: layout.n_ctx,
            layers,
        })
    }

    /// Stores `T` tokens' keys and values (f32, `[head_dim][n_head_kv][T]` ggml order) at
    /// positions `pos0 ..`, converted to f16 (round to nearest even, as ggml's cpy).
    pub fn store(&mut self, layer: usize, pos0: usize, k: &[f32], v: &[f32]) {
        let l = &mut self.layers[layer];
        let ks = l.k_stride();
        let vs = l.v_stride();
        // `half`'s slice conversion: F16C eight at a time where the CPU has it, else the same
        // rounding one by one.
        l.k[pos0 * ks..pos0 * ks + k.len()].convert_from_f32_slice(k);
        l.v[pos0 * vs..pos0 * vs + v.len()].convert_from_f32_slice(v);
    }

    /// See [`tessera_core::backend::Backend::kv_shift`].
    /// `factors_of` gives a rope's frequency factors (a weight's floats).
    pub fn shift<'w>(
        &mut self,
        n_past: usize,
        n_keep: usize,
        n_discard: usize,
        factors_of: impl Fn(WeightId) -> Result<&'w [f32], EngineError>,
    ) -> Result<(), EngineError> {
        let mut cache = Vec::new();
        for l in &mut self.layers {
            let (ks, vs) = (l.k_stride(), l.v_stride());
            l.k.copy_within((n_keep + n_discard) * ks..n_past * ks, n_keep * ks);
            l.v.copy_within((n_keep + n_discard) * vs..n_past * vs, n_keep * vs);
            // Keys were rotated for their old positions; rotating by -n_discard moves them to
            // the new ones (rotations compose), as llama.cpp's K-shift does.
            let rope = l.layout.rope;
            let factors = rope.freq_factors.map(&factors_of).transpose()?;
            cache.resize(rope.n_dims, 0.0);
            rope_cache(-(n_discard as f32), &rope, factors, &mut cache);
            let hd = l.layout.head_dim_k;
            let mut head = vec![0.0f32; hd];
            for pos in n_keep..n_past - n_discard {
                for h in 0..l.layout.n_head_kv {
                    let row = &mut l.k[pos * ks + h * hd..pos * ks + (h + 1) * hd];
                    for (x, s) in head.iter_mut().zip(row.iter()) {
                        *x = s.to_f32();
                    }
                    rotate_head(&mut head, &cache, &rope);
                    for (s, &x) in row.iter_mut().zip(&head) {
                        *s = f16::from_f32(x);
                    }
                }
            }
        }
        Ok(())
    }
}
