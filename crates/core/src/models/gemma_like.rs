//! The Gemma decoder (Gemma 2 and 3): embeddings scaled by sqrt(n_embd), RMS norms before and
//! after both attention and feed-forward, neox rope, GeGLU, and layers that alternate between a
//! sliding window (local) and global attention, as llama.cpp's gemma2 and gemma3 models. The
//! architectures differ in their defaults, which their loaders set in [`GemmaConfig`]: the
//! window pattern, the local layers' rope, soft-capping, q/k norms.

use tessera_gguf::Header;

use super::common::{
    attention_block, ffn_block, load_weights, output_head, AttentionSetup, HParams, IoWeights,
    LayerWeights, Meta,
};
use super::Architecture;
use crate::backend::KvLayout;
use crate::error::EngineError;
use crate::graph::{GraphBuilder, NodeId, RopeMode, RopeParams};
use crate::weights::WeightStore;

/// What differs between the Gemma generations, before the file's keys override it.
pub struct GemmaConfig {
    pub name: &'static str,
    /// Every `swa_pattern`-th layer is global, the others local
    /// (`attention.sliding_window_pattern` overrides it).
    pub swa_pattern: usize,
    /// The window when the file has no `attention.sliding_window`; `None`: no local layers.
    pub default_window: Option<usize>,
    /// The local layers' rope base when the file has no `rope.freq_base_swa`; `None`: the
    /// global base.
    pub local_rope_base: Option<f32>,
    /// Whether the local layers' rope keeps the file's rope scaling (Gemma 3's does not).
    pub local_rope_scaled: bool,
    /// Attention scores are soft-capped (at `attn_logit_softcapping`, 50 by default).
    pub attn_softcap: bool,
    /// The final logits' cap when the file has no `final_logit_softcapping`.
    pub default_final_softcap: Option<f32>,
    /// Every block has q and k norms.
    pub qk_norms: bool,
}

pub struct GemmaLike {
    name: &'static str,
    hp: HParams,
    io: IoWeights,
    layers: Vec<LayerWeights>,
    sliding_window: Option<usize>,
    swa_pattern: usize,
    local_rope: RopeParams,
    global_rope: RopeParams,
    /// Multiplies q before attention.
    q_scale: f32,
    attn_softcap: Option<f32>,
    final_softcap: Option<f32>,
}

impl GemmaLike {
    pub fn load(
        c: &GemmaConfig,
        header: &Header,
        w: &mut WeightStore,
    ) -> Result<GemmaLike, EngineError> {
        let meta = Meta::new(header)?;
        let (hp, io, layers) = load_weights(&meta, w)?;
        for (il, lw) in layers.iter().enumerate() {
            let missing = [
                (c.qk_norms && lw.q_norm.is_none(), "attn_q_norm"),
                (c.qk_norms && lw.k_norm.is_none(), "attn_k_norm"),
                (lw.attn_post_norm.is_none(), "post_attention_norm"),
                (lw.ffn_post_norm.is_none(), "post_ffw_norm"),
            ];
            if let Some((_, name)) = missing.iter().find(|(m, _)| *m) {
                return Err(EngineError::MissingTensor(format!(
                    "blk.{il}.{name}.weight"
                )));
            }
        }
        let sliding_window = meta
            .opt_usize("attention.sliding_window")?
            .or(c.default_window);
        let swa_pattern = meta
            .opt_usize("attention.sliding_window_pattern")?
            .unwrap_or(c.swa_pattern);
        let global_rope = hp.rope(RopeMode::Neox, hp.rope_freq_base);
        let local_base = meta.opt_f32("rope.freq_base_swa")?;
        let mut local_rope = hp.rope(
            RopeMode::Neox,
            local_base
                .or(c.local_rope_base)
                .unwrap_or(hp.rope_freq_base),
        );
        if !c.local_rope_scaled {
            local_rope.freq_scale = 1.0;
        }
        let cap = |key: &str, default: Option<f32>| -> Result<Option<f32>, EngineError> {
            Ok(meta.opt_f32(key)?.or(default).filter(|&c| c > 0.0))
        };
        let attn_softcap = if c.attn_softcap {
            cap("attn_logit_softcapping", Some(50.0))?
        } else {
            None
        };
        let final_softcap = cap("final_logit_softcapping", c.default_final_softcap)?;
        // llama.cpp scales queries by 1/sqrt(n_embd / n_head) for the 27B models (Gemma 2: 46
        // layers, Gemma 3: 62), as Gemma's reference code does, and by 1/sqrt(head_dim) else.
        let is_27b = matches!((c.name, hp.n_layer), ("gemma2", 46) | ("gemma3", 62));
        let q_scale_dim = if is_27b {
            hp.n_embd / hp.n_head
        } else {
            hp.head_dim_k
        };
        Ok(GemmaLike {
            name: c.name,
            q_scale: 1.0 / (q_scale_dim as f32).sqrt(),
            hp,
            io,
            layers,
            sliding_window,
            swa_pattern,
            local_rope,
            global_rope,
            attn_softcap,
            final_softcap,
        })
    }

    /// The sliding window of layer `il`, `None` for a global layer.
    fn window_of(&self, il: usize) -> Option<usize> {
        let local = il % self.swa_pattern < self.swa_pattern - 1;
        self.sliding_window.filter(|_| local)
    }

    fn rope_of(&self, il: usize) -> RopeParams {
        match self.window_of(il) {
            Some(_) => self.local_rope,
            None => self.global_rope,
        }
    }
}

impl Architecture for GemmaLike {
    fn name(&self) -> &'static str {
        self.name
    }

    fn hparams(&self) -> &HParams {
        &self.hp
    }

    fn kv_layout(&self, n_ctx: usize) -> KvLayout {
        self.hp.kv_layout(n_ctx, |il| self.rope_of(il))
    }

    fn build(&self, b: &mut GraphBuilder) -> Result<NodeId, EngineError> {
        let hp = &self.hp;
        let x = b.get_rows(self.io.tok_embd);
        let mut x = b.scale(x, (hp.n_embd as f32).sqrt());
        for (il, lw) in self.layers.iter().enumerate() {
            let setup = AttentionSetup {
                rope: self.rope_of(il),
                q_scale: Some(self.q_scale),
                kq_scale: 1.0,
                window: self.window_of(il),
                softcap: self.attn_softcap,
            };
            let h = b.rms_norm_weighted(x, lw.attn_norm, hp.norm_eps)?;
            let mut a = attention_block(b, hp, lw, il, h, &setup)?;
            if il + 1 == hp.n_layer {
                // Only the rows whose logits are wanted go on (rows are independent from here).
                a = b.output_rows(a);
                x = b.output_rows(x);
            }
            let post = lw.attn_post_norm.expect("checked at load");
            let a = b.rms_norm_weighted(a, post, hp.norm_eps)?;
            let x_attn = b.add(a, x)?;
            let h = b.rms_norm_weighted(x_attn, lw.ffn_norm, hp.norm_eps)?;
            let f = ffn_block(b, hp, lw, h, true)?;
            let post = lw.ffn_post_norm.expect("checked at load");
            let f = b.rms_norm_weighted(f, post, hp.norm_eps)?;
            x = b.add(f, x_attn)?;
        }
        output_head(b, hp, &self.io, x, self.final_softcap)
    }
}
