//! Gemma 3 (text): embeddings scaled by sqrt(n_embd), RMS norms before and after both attention
//! and feed-forward, q/k RMS norms per head, neox rope, GeGLU, and interleaved layers: five
//! sliding-window (local, rope base 10000) layers then one global layer (rope base from the
//! file), as llama.cpp's gemma3 model.

use tessera_gguf::Header;

use super::common::{
    attention_block, ffn_block, output_head, AttentionSetup, HParams, IoWeights, LayerWeights, Meta,
};
use super::Architecture;
use crate::backend::KvLayout;
use crate::error::EngineError;
use crate::graph::{GraphBuilder, NodeId, RopeMode, RopeParams};
use crate::weights::WeightStore;

/// Every `SWA_PATTERN`-th layer is global; the others use the sliding window.
const SWA_PATTERN: usize = 6;
/// Rope base of the sliding-window layers.
const LOCAL_ROPE_BASE: f32 = 10000.0;

pub struct Gemma3 {
    hp: HParams,
    io: IoWeights,
    layers: Vec<LayerWeights>,
    sliding_window: usize,
    /// Multiplies q before attention: 1/sqrt(query_pre_attn_scalar) (= head_dim here).
    q_scale: f32,
    final_softcap: Option<f32>,
}

impl Gemma3 {
    pub fn load(header: &Header, w: &mut WeightStore) -> Result<Gemma3, EngineError> {
        let meta = Meta::new(header)?;
        let mut hp = HParams::read(&meta)?;
        let io = IoWeights::load(&mut hp, w)?;
        let layers = (0..hp.n_layer)
            .map(|il| LayerWeights::load(&hp, w, il))
            .collect::<Result<Vec<_>, _>>()?;
        for (il, lw) in layers.iter().enumerate() {
            let missing = [
                (lw.q_norm.is_none(), "attn_q_norm"),
                (lw.k_norm.is_none(), "attn_k_norm"),
                (lw.attn_post_norm.is_none(), "post_attention_norm"),
                (lw.ffn_post_norm.is_none(), "post_ffw_norm"),
            ];
            if let Some((_, name)) = missing.iter().find(|(m, _)| *m) {
                return Err(EngineError::MissingTensor(format!(
                    "blk.{il}.{name}.weight"
                )));
            }
        }
        let sliding_window = meta.usize("attention.sliding_window")?;
        let final_softcap = meta
            .opt_f32("final_logit_softcapping")?
            .filter(|&c| c > 0.0);
        Ok(Gemma3 {
            q_scale: 1.0 / (hp.head_dim_k as f32).sqrt(),
            hp,
            io,
            layers,
            sliding_window,
            final_softcap,
        })
    }

    fn is_local(il: usize) -> bool {
        il % SWA_PATTERN < SWA_PATTERN - 1
    }

    fn rope_of(&self, il: usize) -> RopeParams {
        let base = if Self::is_local(il) {
            LOCAL_ROPE_BASE
        } else {
            self.hp.rope_freq_base
        };
        self.hp.rope(RopeMode::Neox, base)
    }
}

impl Architecture for Gemma3 {
    fn name(&self) -> &'static str {
        "gemma3"
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
                window: Self::is_local(il).then_some(self.sliding_window),
                softcap: None,
            };
            let h = b.rms_norm_weighted(x, lw.attn_norm, hp.norm_eps)?;
            let mut a = attention_block(b, hp, lw, il, h, &setup)?;
            if il + 1 == hp.n_layer {
                a = b.output_rows(a);
                x = b.output_rows(x);
            }
            let post = lw.attn_post_norm.expect("checked at load");
            let a = b.rms_norm_weighted(a, post, hp.norm_eps)?;
            let x_attn = b.add(a, x)?;
            let h = b.rms_norm_weighted(x_attn, lw.ffn_norm, hp.norm_eps)?;
            let f = ffn_block(b, lw, h, true)?;
            let post = lw.ffn_post_norm.expect("checked at load");
            let f = b.rms_norm_weighted(f, post, hp.norm_eps)?;
            x = b.add(f, x_attn)?;
        }
        output_head(b, hp, &self.io, x, self.final_softcap)
    }
}
