//! Phi-3 / Phi-3.5: the llama-style decoder ([`LlamaLike`]) with one fused q/k/v projection
//! (`attn_qkv`), one fused gate/up projection (`ffn_up` of 2·n_ff rows, the gate's first), neox
//! rope and q scaled before attention, as llama.cpp's phi3 model. Phi-3.5's LongRoPE: the
//! short or long rope factors by the context's size, cosines and sines times
//! `rope.scaling.attn_factor`. Files carry a sliding window that llama.cpp ignores for Phi-3;
//! so does this.

use tessera_gguf::Header;

use super::common::{FfnWeights, GateUpWeights, Meta, QkvWeights};
use super::llama_like::LlamaLike;
use super::Architecture;
use crate::error::EngineError;
use crate::graph::RopeMode;
use crate::weights::WeightStore;

pub fn load(header: &Header, w: &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError> {
    let m = LlamaLike::load("phi3", RopeMode::Neox, header, w)?;
    let orig_ctx = Meta::new(header)?.opt_usize("rope.scaling.original_context_length")?;
    let m = m.with_long_rope(orig_ctx, w)?;
    let fused_qkv = m
        .layers
        .iter()
        .position(|lw| !matches!(lw.qkv, QkvWeights::Fused { .. }));
    let fused_ffn = m.layers.iter().position(|lw| {
        !matches!(
            lw.ffn,
            FfnWeights::Dense {
                gate_up: GateUpWeights::Fused { .. },
                ..
            }
        )
    });
    if let Some(il) = fused_qkv.or(fused_ffn) {
        return Err(EngineError::MissingTensor(format!(
            "blk.{il}.attn_qkv.weight / blk.{il}.ffn_up.weight of 2·n_ff rows (phi3 fuses them)"
        )));
    }
    Ok(Box::new(m.with_q_prescaled()))
}
