//! Qwen3 (dense): the llama-style decoder ([`LlamaLike`]) with an RMS norm of each q and k head
//! before rope, rope on the two halves of each head (neox), as llama.cpp's qwen3 model.

use tessera_gguf::Header;

use super::llama_like::LlamaLike;
use super::Architecture;
use crate::error::EngineError;
use crate::graph::RopeMode;
use crate::weights::WeightStore;

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    let m = LlamaLike::load("qwen3", RopeMode::Neox, header, w)?;
    m.require("attn_q_norm.weight", |lw| lw.q_norm)?;
    m.require("attn_k_norm.weight", |lw| lw.k_norm)?;
    Ok(Box::new(m))
}
