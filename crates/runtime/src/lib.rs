//! Tessera's runtime: turns a loaded model and a context into text.
//!
//! - [`generate`]: the generation state machine (prompt, decode, sample, stream) and its
//!   [`StopReason`](generate::StopReason).
//! - [`stop`]: stop strings, matched across token boundaries.
//! - [`speculative`]: speculative decoding (draft model, n-gram drafts) as llama.cpp does it.
//! - [`perplexity`]: llama-perplexity's measurement.
//!
//! The sampling chain itself is `tessera_core::sampling` (backends may run it on their device),
//! re-exported here as [`sampling`].

pub mod generate;
pub mod perplexity;
pub mod speculative;
pub mod stop;

pub use tessera_core::sampling;
