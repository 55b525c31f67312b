//! The llama-style decoder (llama, qwen2, qwen3): per block an RMS norm, attention, the
//! residual, an RMS norm, a SwiGLU feed-forward, the residual; then the output head.

use tessera_gguf::Header;

use super::common::{
    attention_block, ffn_block, load_weights, output_head, AttentionSetup, HParams, IoWeights,
    LayerWeights, Meta,
};
use crate::backend::KvLayout;
use crate::error::EngineError;
use crate::graph::{GraphBuilder, NodeId, RopeMode, RopeParams};
use crate::weights::{WeightId, WeightStore};

/// The llama-style decoder several architectures share (llama, qwen2, qwen3, phi3): per block
/// an RMS norm, attention scaled by 1/sqrt(head_dim), the residual, an RMS norm, a SwiGLU
/// feed-forward, the residual; then the output head. They differ in the rope mode, in optional
/// or fused tensors (q/k/v biases, q/k norms, fused q/k/v and gate/up), which the loaders
/// check, and in where the attention scale is applied.
pub struct LlamaLike {
    name: &'static str,
    rope_mode: RopeMode,
    /// `rope_freqs.weight`, where the architecture reads it ([`LlamaLike::with_rope_freqs`]).
    rope_freqs: Option<WeightId>,
    /// q is multiplied by 1/sqrt(head_dim) before attention instead of the scores inside it
    /// (Phi-3, as llama.cpp builds it; the roundings differ).
    q_prescaled: bool,
    pub hp: HParams,
    pub io: IoWeights,
    pub layers: Vec<LayerWeights>,
}

impl LlamaLike {
    pub fn load(
        name: &'static str,
        rope_mode: RopeMode,
        header: &Header,
        w: &mut WeightStore,
    ) -> Result<LlamaLike, EngineError> {
        let meta = Meta::new(header)?;
        let (hp, io, layers) = load_weights(&meta, w)?;
        Ok(LlamaLike {
            name,
            rope_mode,
            rope_freqs: None,
            q_prescaled: false,
            hp,
            io,
            layers,
        })
    }

    /// Fails unless every block has the tensor `pick` selects (named `what`).
    pub fn require(
        &self,
        what: &str,
        pick: impl Fn(&LayerWeights) -> Option<WeightId>,
    ) -> Result<(), EngineError> {
        match self.layers.iter().position(|lw| pick(lw).is_none()) {
            Some(il) => Err(EngineError::MissingTensor(format!("blk.{il}.{what}"))),
            None => Ok(()),
        }
    }

    /// Reads `rope_freqs.weight` where the file has it: a divisor of each rotated pair's
    /// angle, which is how GGUF stores Llama 3.1's rope scaling (`rope_type: llama3`).
    pub fn with_rope_freqs(mut self, w: &mut WeightStore) -> Result<LlamaLike, EngineError> {
        self.rope_freqs = w.optional("rope_freqs.weight", &[self.hp.rope_dims / 2])?;
        Ok(self)
    }

    /// Multiplies q by 1/sqrt(head_dim) before attention instead of the scores inside it
    /// (Phi-3, as llama.cpp builds it; the roundings differ).
    pub fn with_q_prescaled(mut self) -> LlamaLike {
        self.q_prescaled = true;
        self
    }

    fn rope(&self) -> RopeParams {
        RopeParams {
            freq_factors: self.rope_freqs,
            ..self.hp.rope(self.rope_mode, self.hp.rope_freq_base)
        }
    }
}

impl super::Architecture for LlamaLike {
    fn name(&self) -> &'static str {
        self.name
    }

    fn hparams(&self) -> &HParams {
        &self.hp
    }

    fn kv_layout(&self, n_ctx: usize) -> KvLayout {
        let rope = self.rope();
        self.hp.kv_layout(n_ctx, |_| rope)
    }

    fn build(&self, b: &mut GraphBuilder) -> Result<NodeId, EngineError> {
        let hp = &self.hp;
        let scale = 1.0 / (hp.head_dim_k as f32).sqrt();
        let setup = AttentionSetup {
            rope: self.rope(),
            q_scale: self.q_prescaled.then_some(scale),
            kq_scale: if self.q_prescaled { 1.0 } else { scale },
            window: None,
            softcap: None,
        };
        let mut x = b.get_rows(self.io.tok_embd);
        for (il, lw) in self.layers.iter().enumerate() {
            let h = b.rms_norm_weighted(x, lw.attn_norm, hp.norm_eps)?;
            let mut a = attention_block(b, hp, lw, il, h, &setup)?;
            if il + 1 == hp.n_layer {
                // Only the rows whose logits are wanted go on (rows are independent from here).
                a = b.output_rows(a);
                x = b.output_rows(x);
            }
            let x_attn = b.add(a, x)?;
            let h = b.rms_norm_weighted(x_attn, lw.ffn_norm, hp.norm_eps)?;
            let f = ffn_block(b, hp, lw, h, false)?;
            x = b.add(f, x_attn)?;
        }
        output_head(b, hp, &self.io, x, None)
    }
}
