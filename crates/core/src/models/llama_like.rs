//! The llama-style decoder (llama, qwen2, qwen3): per block an RMS norm, attention, the
//! residual, an RMS norm, a SwiGLU feed-forward, the residual; then the output head.

use tessera_gguf::Header;

use super::common::{
    attention_block, ffn_block, load_weights, output_head, AttentionSetup, FfnWeights, HParams,
    IoWeights, LayerWeights, Meta,
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
    /// Rope frequency factors, where the architecture reads them.
    rope_factors: RopeFactors,
    /// q is multiplied by 1/sqrt(head_dim) before attention instead of the scores inside it
    /// (Phi-3, as llama.cpp builds it; the roundings differ).
    q_prescaled: bool,
    /// Local layers with a sliding window, where the architecture has them.
    swa: Option<SlidingWindow>,
    pub hp: HParams,
    pub io: IoWeights,
    pub layers: Vec<LayerWeights>,
}

/// Sliding-window attention on some layers: layer `il` is local when
/// `il % pattern < pattern - 1` (llama.cpp's `set_swa_pattern`).
struct SlidingWindow {
    window: usize,
    pattern: usize,
    /// The local layers' rope (`rope.freq_base_swa`).
    rope: RopeParams,
}

/// Rope frequency factors: none, one set (Llama 3), or LongRoPE's two sets chosen by the
/// context's size (Phi-3).
enum RopeFactors {
    None,
    Fixed(WeightId),
    ByContext {
        short: Option<WeightId>,
        long: Option<WeightId>,
        n_ctx_orig: usize,
    },
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
            rope_factors: RopeFactors::None,
            q_prescaled: false,
            swa: None,
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

    /// Fails unless every block has experts (a router).
    pub fn require_experts_everywhere(&self) -> Result<(), EngineError> {
        match self
            .layers
            .iter()
            .position(|lw| !matches!(lw.ffn, FfnWeights::Moe(_)))
        {
            Some(il) => Err(EngineError::MissingTensor(format!(
                "blk.{il}.ffn_gate_inp.weight"
            ))),
            None => Ok(()),
        }
    }

    /// Reads `rope_freqs.weight` where the file has it: a divisor of each rotated pair's
    /// angle, which is how GGUF stores Llama 3.1's rope scaling (`rope_type: llama3`).
    pub fn with_rope_freqs(mut self, w: &mut WeightStore) -> Result<LlamaLike, EngineError> {
        if let Some(f) = w.optional("rope_freqs.weight", &[self.hp.rope_dims / 2])? {
            self.rope_factors = RopeFactors::Fixed(f);
        }
        Ok(self)
    }

    /// Reads Phi-3's LongRoPE factors where the file has them: `rope_factors_short.weight`
    /// for contexts up to `rope.scaling.original_context_length` (the training context when
    /// absent), `rope_factors_long.weight` beyond, as llama.cpp chooses them.
    pub fn with_long_rope(
        mut self,
        orig_ctx: Option<usize>,
        w: &mut WeightStore,
    ) -> Result<LlamaLike, EngineError> {
        let n = [self.hp.rope_dims / 2];
        let short = w.optional("rope_factors_short.weight", &n)?;
        let long = w.optional("rope_factors_long.weight", &n)?;
        self.rope_factors = match (short, long) {
            (None, None) => RopeFactors::None,
            (short, long) => RopeFactors::ByContext {
                short,
                long,
                n_ctx_orig: orig_ctx.unwrap_or(self.hp.n_ctx_train),
            },
        };
        Ok(self)
    }

    /// Multiplies q by 1/sqrt(head_dim) before attention instead of the scores inside it
    /// (Phi-3, as llama.cpp builds it; the roundings differ).
    pub fn with_q_prescaled(mut self) -> LlamaLike {
        self.q_prescaled = true;
        self
    }

    /// Sliding-window attention on the local layers: `attention.sliding_window` keys, every
    /// `attention.sliding_window_pattern`-th layer (`default_pattern` when absent) global,
    /// the local ones with rope base `rope.freq_base_swa` (the global base when absent).
    pub fn with_sliding_window(
        mut self,
        header: &Header,
        default_pattern: usize,
    ) -> Result<LlamaLike, EngineError> {
        let meta = Meta::new(header)?;
        let base = meta
            .opt_f32("rope.freq_base_swa")?
            .unwrap_or(self.hp.rope_freq_base);
        self.swa = Some(SlidingWindow {
            window: meta.usize("attention.sliding_window")?,
            pattern: meta
                .opt_usize("attention.sliding_window_pattern")?
                .unwrap_or(default_pattern),
            rope: self.hp.rope(self.rope_mode, base),
        });
        Ok(self)
    }

    /// Layer `il`'s window and rope: the local ones', or `None` and `global` for a global
    /// layer.
    fn layer_attention(&self, il: usize, global: RopeParams) -> (Option<usize>, RopeParams) {
        match &self.swa {
            Some(s) if il % s.pattern < s.pattern - 1 => (Some(s.window), s.rope),
            _ => (None, global),
        }
    }

    /// The rope of a context of `n_ctx` positions (0: unknown).
    fn rope(&self, n_ctx: usize) -> RopeParams {
        let freq_factors = match self.rope_factors {
            RopeFactors::None => None,
            RopeFactors::Fixed(f) => Some(f),
            RopeFactors::ByContext {
                short,
                long,
                n_ctx_orig,
            } => {
                if n_ctx > n_ctx_orig {
                    long
                } else {
                    short
                }
            }
        };
        RopeParams {
            freq_factors,
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
        let rope = self.rope(n_ctx);
        self.hp
            .kv_layout(n_ctx, |il| self.layer_attention(il, rope).1)
    }

    fn build(&self, b: &mut GraphBuilder) -> Result<NodeId, EngineError> {
        let hp = &self.hp;
        let scale = 1.0 / (hp.head_dim_k as f32).sqrt();
        let global_rope = self.rope(b.n_ctx);
        let mut x = b.get_rows(self.io.tok_embd);
        for (il, lw) in self.layers.iter().enumerate() {
            let (window, rope) = self.layer_attention(il, global_rope);
            let setup = AttentionSetup {
                rope,
                q_scale: self.q_prescaled.then_some(scale),
                kq_scale: if self.q_prescaled { 1.0 } else { scale },
                window,
                softcap: None,
            };
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
