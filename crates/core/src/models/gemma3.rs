//! Gemma 3 (text): the Gemma decoder ([`GemmaLike`]) with q/k norms, five sliding-window layers
//! then one global layer, as llama.cpp's gemma3 model. The local layers' rope has its own base
//! (`rope.freq_base_swa`, 10000 by default) and no scaling: the file's rope scaling (linear x8
//! in Gemma 3 4B and larger) applies to the global layers only. A file without
//! `attention.sliding_window` attends globally everywhere.

use tessera_gguf::Header;

use super::gemma_like::{GemmaConfig, GemmaLike};
use super::Architecture;
use crate::error::EngineError;
use crate::weights::WeightStore;

pub const CONFIG: GemmaConfig = GemmaConfig {
    name: "gemma3",
    swa_pattern: 6,
    default_window: None,
    local_rope_base: Some(10000.0),
    local_rope_scaled: false,
    attn_softcap: false,
    default_final_softcap: None,
    qk_norms: true,
};

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    Ok(Box::new(GemmaLike::load(&CONFIG, header, w)?))
}
