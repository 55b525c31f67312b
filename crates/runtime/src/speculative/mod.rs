//! Speculative decoding: cheap drafts verified by the target model in one batch.
//!
//! The shape follows llama.cpp's speculative framework (see `docs/speculative.md`):
//! a [`Speculator`] is told the prompt ([`Speculator::begin`]), proposes draft tokens that
//! continue the history after the token just sampled ([`Speculator::draft`]), and learns how many
//! of them the target accepted ([`Speculator::accept`]). A [`SpeculatorChain`] holds the
//! configured implementations in order of preference (draftless n-gram types before a draft
//! model), applies the common limits (`n_max`, `n_min`) and keeps the statistics.
//! [`verify_draft`] checks a draft against the target's own sampling. The loop that drafts and
//! verifies is the one generation state machine, [`crate::generation::Generation`], given a
//! [`SpeculatorChain`]; [`SpecContext`] is what a draft model's context must offer.
//!
//! Everything here is platform-neutral: cache files are read from and written to byte buffers,
//! the host does the file I/O.

mod chain;
mod draft_model;
mod engine_adapter;
mod ngram_cache;
mod ngram_map;
mod ngram_simple;
mod options;
mod params;
mod stats;
mod verify;

pub use chain::SpeculatorChain;
pub use draft_model::{
    top_token_confidence, DraftModelSpeculator, SpecContext, TextCodec, VocabBridge,
};
pub use engine_adapter::{draft_model_speculator, vocabularies_match, ModelCodec};
pub use ngram_cache::{NgramCache, NgramCacheSpeculator, NGRAM_MAX, NGRAM_STATIC};
pub use ngram_map::NgramMap;
pub use ngram_simple::NgramSimple;
pub use options::SpeculativeOptions;
pub use params::{SpecParams, SpecType};
pub use stats::{format_acceptance, SpecStats};
pub use verify::{verify_draft, Verified};

/// Errors of the speculative machinery.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// A bad option value (the message names the option and the accepted range).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A lookup-cache file that is not a well-formed n-gram cache.
    #[error("malformed n-gram cache at byte {offset}: {reason}")]
    CacheFormat { offset: usize, reason: String },
    /// A model context (target or draft) failed.
    #[error(transparent)]
    Engine(#[from] tessera_core::error::EngineError),
    /// A context that is not the engine's failed (test doubles, other hosts).
    #[error("model context: {0}")]
    Context(String),
    /// The sampler refused the logits.
    #[error(transparent)]
    Sampling(#[from] tessera_core::sampling::SamplingError),
    /// Text ↔ token translation between two vocabularies failed.
    #[error("vocabulary translation: {0}")]
    Translation(String),
}

/// One speculative-decoding implementation (an n-gram type or a draft model).
///
/// Protocol, per generation: `begin(prompt)` once, then repeatedly `draft(history, last)` where
/// `history` is every token the target has evaluated (prompt included) and `last` the token the
/// target sampled last (not evaluated yet), and `accept(n)` after verification when `n ≥ 1` of
/// this implementation's draft tokens were accepted.
pub trait Speculator: Send {
    /// Which `--spec-type` this is.
    fn kind(&self) -> SpecType;

    /// A new generation starts with this prompt; per-sequence state is reset.
    fn begin(&mut self, prompt: &[u32]) -> Result<(), SpecError>;

    /// Appends proposed continuation tokens of `history ++ [last]` to `out` (possibly none).
    fn draft(&mut self, history: &[u32], last: u32, out: &mut Vec<u32>) -> Result<(), SpecError>;

    /// `n_accepted` (≥ 1) tokens of the last draft this implementation made were accepted.
    fn accept(&mut self, n_accepted: usize);

    /// For `ngram-cache`: the dynamic cache to save after generation (the loaded dynamic cache
    /// merged with this generation's context statistics). Other types have none.
    fn dynamic_cache(&self) -> Option<NgramCache> {
        None
    }
}
