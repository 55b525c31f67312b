//! Tessera's runtime: turns a loaded model and a context into text.
//!
//! - [`generation`]: the generation state machine. A [`Generation`] is advanced one [`Step`]
//!   at a time (a prompt slice, a token, a verified draft,
//!   [`Pending`](generation::Step::Pending) on an asynchronous backend, then
//!   [`Done`](generation::Step::Done)); every host drives it: the CLI, the browser session,
//!   the server's slots. It owns the types a generation is described by: what it is asked for
//!   and how it ends ([`StopReason`], [`GenerateStats`](generation::GenerateStats)), the
//!   host's [`Clock`](generation::Clock).
//! - [`generate`]: the one-call driver over it: prompt tokenization and
//!   [`generate::generate`], a whole generation in one call.
//! - [`stop`]: stop strings, matched across token boundaries.
//! - [`constraint`]: constrained decoding (JSON schema, regular expression, Lark grammar).
//! - [`speculative`]: speculative decoding (draft model, n-gram drafts) as llama.cpp does it.
//! - [`perplexity`]: llama-perplexity's measurement.
//! - `request` (feature `serde`): the OpenAI-shaped request the server and the browser take,
//!   parsed and checked once, with the table of every field's limits.
//!
//! The sampling chain itself is `tessera_core::sampling` (backends may run it on their device),
//! re-exported here as [`sampling`].

pub mod chat_output;
pub mod constraint;
pub mod generate;
pub mod generation;
pub mod perplexity;
#[cfg(feature = "serde")]
pub mod request;
pub mod speculative;
pub mod stop;

pub use generate::StopReason;
pub use generation::{Generation, GenerationOptions, Step};
pub use tessera_core::sampling;
