//! Tessera's core: what every target shares between the GGUF file and a backend.
//!
//! - [`weights`]: the model's tensors, kept in the GGUF file (never copied) or on a device.
//! - [`graph`]: the compute graph an architecture builds for a batch; [`plan`]: its buffer plan,
//!   which every backend uses.
//! - [`backend`]: the [`Backend`] trait a device implements (CPU, WebGPU, ...).
//! - [`models`]: the architectures, one file each, and their registry.
//! - [`Model`]: a loaded model (weights, architecture, tokenizer); [`Context`]: the KV caches
//!   of one or several sequences on a backend, fed tokens in micro-batches (several
//!   sequences' tokens in one batch: [`Context::decode_together`]).
//! - [`sampling`]: the sampling chain, which backends may run on their device.
//! - [`threading`]: the thread-pool trait the hosts provide.
//!
//! Generation, stop strings and speculative decoding are in `tessera-runtime`; the kernels in
//! the backend crates.

pub mod backend;
pub mod context;
pub mod error;
pub mod graph;
pub mod model;
pub mod models;
pub mod plan;
pub mod sampling;
pub mod tensor;
pub mod threading;
pub mod weights;

pub use backend::{Backend, Batch, KvLayout, Segment};
pub use context::{Context, ContextParams, SeqTokens};
pub use error::EngineError;
pub use model::Model;
pub use threading::{SequentialPool, ThreadPool};
