//! dots.llm1: qwen3-style attention ([`LlamaLike`]: q/k norms, neox rope) with, after
//! `leading_dense_block_count` dense blocks, a mixture of experts per block: a router with the
//! file's gating (sigmoid in dots.llm1) and an expert selection bias (`exp_probs_b`), weights
//! normalised and scaled as the file says, plus shared experts, as llama.cpp's dots1 model.

use tessera_gguf::Header;

use super::llama_like::LlamaLike;
use super::Architecture;
use crate::error::EngineError;
use crate::graph::RopeMode;
use crate::weights::WeightStore;

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    let m = LlamaLike::load("dots1", RopeMode::Neox, header, w)?;
    if m.hp.moe.is_none() {
        return Err(EngineError::MissingKey("dots1.expert_count".into()));
    }
    m.require("attn_q_norm.weight", |lw| lw.q_norm)?;
    m.require("attn_k_norm.weight", |lw| lw.k_norm)?;
    Ok(Box::new(m))
}
