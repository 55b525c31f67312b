//! The llama architecture (Llama 2/3, SmolLM2, ...): the llama-style decoder
//! ([`LlamaLike`]) with rope on adjacent pairs, and Llama 3.1's rope scaling where the file
//! has `rope_freqs.weight`.

use tessera_gguf::Header;

use super::llama_like::LlamaLike;
use super::Architecture;
use crate::error::EngineError;
use crate::graph::RopeMode;
use crate::weights::WeightStore;

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    let m = LlamaLike::load("llama", RopeMode::Normal, header, w)?;
    Ok(Box::new(m.with_rope_freqs(w)?))
}
