//! gpt-oss: the llama-style decoder ([`LlamaLike`], neox rope, usually YaRN-scaled) with
//! biases on the q, k, v and output projections, a learned attention sink per head, a
//! 128-token sliding window on every other layer (the even ones), and a mixture of experts in
//! every block: a biased router whose top-k is taken on the raw logits before a softmax over
//! the k chosen, experts with biases and the clamped SwiGLU (`swiglu_oai`, alpha 1.702,
//! limit 7), as llama.cpp's gpt-oss (`openai-moe`) model. The pre-FFN norm is named
//! `post_attention_norm`.

use tessera_gguf::Header;

use super::llama_like::LlamaLike;
use super::moe::ExpertActivation;
use super::Architecture;
use crate::error::EngineError;
use crate::graph::{Gating, RopeMode};
use crate::weights::WeightStore;

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    let mut m =
        LlamaLike::load("gpt-oss", RopeMode::Neox, header, w)?.with_sliding_window(header, 2)?;
    let moe =
        m.hp.moe
            .as_mut()
            .ok_or_else(|| EngineError::MissingKey("gpt-oss.expert_count".into()))?;
    // As llama.cpp builds gpt-oss, whatever the file says.
    moe.gating = Gating::SoftmaxAfterTopK;
    moe.activation = ExpertActivation::SwigluOai {
        alpha: 1.702,
        limit: 7.0,
    };
    moe.normalize = false;
    moe.scale = 1.0;
    m.require_experts_everywhere()?;
    m.require("attn_sinks.weight", |lw| lw.sinks)?;
    Ok(Box::new(m))
}
