//! Gemma 2: the Gemma decoder ([`GemmaLike`]) with soft-capped attention scores (50 unless the
//! file says otherwise) and final logits (30), a sliding window (4096 by default) on every other
//! layer, the same rope on every layer, as llama.cpp's gemma2 model.

use tessera_gguf::Header;

use super::gemma_like::{GemmaConfig, GemmaLike};
use super::Architecture;
use crate::error::EngineError;
use crate::weights::WeightStore;

pub const CONFIG: GemmaConfig = GemmaConfig {
    name: "gemma2",
    swa_pattern: 2,
    default_window: Some(4096),
    local_rope_base: None,
    local_rope_scaled: true,
    attn_softcap: true,
    default_final_softcap: Some(30.0),
    qk_norms: false,
};

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    Ok(Box::new(GemmaLike::load(&CONFIG, header, w)?))
}
