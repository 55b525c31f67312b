//! Qwen3-MoE: qwen3's attention ([`LlamaLike`]: q/k norms, neox rope) with a mixture of experts
//! in every block: a softmax router, `expert_used_count` experts whose weights are normalised
//! to sum to 1, as llama.cpp's qwen3moe model. The experts' gate and up matrices may be fused
//! (`ffn_gate_up_exps`).

use tessera_gguf::Header;

use super::llama_like::LlamaLike;
use super::Architecture;
use crate::error::EngineError;
use crate::graph::RopeMode;
use crate::weights::WeightStore;

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    let mut m = LlamaLike::load("qwen3moe", RopeMode::Neox, header, w)?;
    let moe =
        m.hp.moe
            .as_mut()
            .ok_or_else(|| EngineError::MissingKey("qwen3moe.expert_count".into()))?;
    // llama.cpp's qwen3moe always normalises, whatever the file says.
    moe.normalize = true;
    m.require_experts_everywhere()?;
    m.require("attn_q_norm.weight", |lw| lw.q_norm)?;
    m.require("attn_k_norm.weight", |lw| lw.k_norm)?;
    Ok(Box::new(m))
}
