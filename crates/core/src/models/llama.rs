//! The llama architecture (Llama 2/3, SmolLM2, ...): pre-norm blocks with RMS norm, rope on
//! adjacent pairs, grouped-query attention scaled by 1/sqrt(head_dim), SwiGLU feed-forward.

use tessera_gguf::Header;

use super::common::{
    attention_block, ffn_block, output_head, AttentionSetup, HParams, IoWeights, LayerWeights, Meta,
};
use super::Architecture;
use crate::backend::KvLayout;
use crate::error::EngineError;
use crate::graph::{GraphBuilder, NodeId, RopeMode};
use crate::weights::WeightStore;

pub struct Llama {
    hp: HParams,
    io: IoWeights,
    layers: Vec<LayerWeights>,
}

impl Llama {
    pub fn load(header: &Header, w: &mut WeightStore) -> Result<Llama, EngineError> {
        let meta = Meta::new(header)?;
        let mut hp = HParams::read(&meta)?;
        let io = IoWeights::load(&mut hp, w)?;
        let layers = (0..hp.n_layer)
            .map(|il| LayerWeights::load(&hp, w, il))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Llama { hp, io, layers })
    }
}

impl Architecture for Llama {
    fn name(&self) -> &'static str {
        "llama"
    }

    fn hparams(&self) -> &HParams {
        &self.hp
    }

    fn kv_layout(&self, n_ctx: usize) -> KvLayout {
        let rope = self.hp.rope(RopeMode::Normal, self.hp.rope_freq_base);
        self.hp.kv_layout(n_ctx, |_| rope)
    }

    fn build(&self, b: &mut GraphBuilder) -> Result<NodeId, EngineError> {
        let hp = &self.hp;
        let setup = AttentionSetup {
            rope: hp.rope(RopeMode::Normal, hp.rope_freq_base),
            q_scale: None,
            kq_scale: 1.0 / (hp.head_dim_k as f32).sqrt(),
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
            let f = ffn_block(b, lw, h, false)?;
            x = b.add(f, x_attn)?;
        }
        output_head(b, hp, &self.io, x, None)
    }
}
