//! Model architectures, one file each. An architecture reads its hyper-parameters, registers
//! and checks its weights, describes its KV cache and builds the forward graph for a batch.
//! Pieces every architecture shares (hyper-parameters, the layer weights, attention and FFN
//! blocks) are in [`common`], the two decoder families in [`llama_like`] and [`gemma_like`]; a
//! new architecture is a short file on top of them plus one line in [`REGISTRY`].

pub mod common;
pub mod dots1;
pub mod gemma2;
pub mod gemma3;
pub mod gemma_like;
pub mod gpt_oss;
pub mod llama;
pub mod llama_like;
pub mod moe;
pub mod phi3;
pub mod qwen2;
pub mod qwen3;
pub mod qwen3moe;

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

/// An architecture's loader: reads its hyper-parameters and registers its weights.
pub type Loader = fn(&Header, &mut WeightStore) -> Result<Box<dyn Architecture>, EngineError>;

/// Every architecture, by its `general.architecture` name.
pub const REGISTRY: &[(&str, Loader)] = &[
    ("llama", llama::load),
    ("qwen2", qwen2::load),
    ("qwen3", qwen3::load),
    ("qwen3moe", qwen3moe::load),
    ("dots1", dots1::load),
    ("phi3", phi3::load),
    ("gemma2", gemma2::load),
    ("gemma3", gemma3::load),
    ("gpt-oss", gpt_oss::load),
];

/// The names of the supported architectures, comma-separated (for error messages).
pub fn supported() -> String {
    let names: Vec<&str> = REGISTRY.iter().map(|(name, _)| *name).collect();
    names.join(", ")
}

fn loader(arch: &str) -> Option<Loader> {
    REGISTRY
        .iter()
        .find(|(name, _)| *name == arch)
        .map(|(_, load)| *load)
}

/// Whether `arch` (a `general.architecture` value) is one Tessera runs.
pub fn is_supported(arch: &str) -> bool {
    loader(arch).is_some()
}

/// The architecture named in `general.architecture`, with its weights registered in `weights`.
pub fn load(
    header: &Header,
    weights: &mut WeightStore,
) -> Result<Box<dyn Architecture>, EngineError> {
    let arch = header.architecture().ok_or(EngineError::NoArchitecture)?;
    match loader(arch) {
        Some(load) => load(header, weights),
        None => Err(EngineError::UnknownArchitecture(arch.to_string())),
    }
}
