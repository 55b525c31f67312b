//! Model architectures, one file each. An architecture reads its hyper-parameters, registers
//! and checks its weights, describes its KV cache and builds the forward graph for a batch.
//! Pieces every architecture shares (hyper-parameters, the layer weights, attention and FFN
//! blocks) are in [`common`]; a new architecture is a short file on top of it.

pub mod common;
pub mod gemma3;
pub mod llama;

use tessera_gguf::Header;

use crate::backend::KvLayout;
use crate::error::EngineError;
use crate::graph::{GraphBuilder, NodeId};
use crate::weights::WeightStore;

pub use common::HParams;

pub trait Architecture: Send + Sync {
    fn name(&self) -> &'static str;
    fn hparams(&self) -> &HParams;
    /// The KV cache this architecture needs for `n_ctx` positions.
    fn kv_layout(&self, n_ctx: usize) -> KvLayout;
    /// Adds the forward pass to `b` and returns the logits node (`[n_vocab, n_outputs]`).
    fn build(&self, b: &mut GraphBuilder) -> Result<NodeId, EngineError>;
}

/// The architecture named in `general.architecture`, with its weights registered in `weights`.
pub fn load(
    header: &Header,
    weights: &mut WeightStore,
) -> Result<Box<dyn Architecture>, EngineError> {
    let arch = header
        .architecture()
        .ok_or(EngineError::NoArchitecture)?
        .to_string();
    match arch.as_str() {
        "llama" => Ok(Box::new(llama::Llama::load(header, weights)?)),
        "gemma3" => Ok(Box::new(gemma3::Gemma3::load(header, weights)?)),
        _ => Err(EngineError::UnknownArchitecture(arch)),
    }
}
