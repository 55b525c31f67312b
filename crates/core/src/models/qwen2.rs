//! Qwen2 / Qwen2.5: the llama-style decoder ([`LlamaLike`]) with biases on the q, k and v
//! projections and rope on the two halves of each head (neox), as llama.cpp's qwen2 model.

use tessera_gguf::Header;

use super::llama_like::LlamaLike;
use super::Architecture;
use crate::error::EngineError;
use crate::graph::RopeMode;
use crate::weights::WeightStore;

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    // llama.cpp loads the biases as optional tensors; every Qwen2 file has them.
    Ok(Box::new(LlamaLike::load(
        "qwen2",
        RopeMode::Neox,
        header,
        w,
    )?))
}
