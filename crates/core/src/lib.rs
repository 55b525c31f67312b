//! Tessera's core: what every target shares between the GGUF file and a backend.
//!
//! - [`weights`]: the model's tensors, kept in the GGUF file (never copied) or on a device.
//! - [`graph`]: the compute graph an architecture builds for a batch; [`plan`]: its buffer plan,
//!   which every backend uses.
//! - [`backend`]: the [`Backend`] trait a device implements (CPU, WebGPU, ...).
//! - [`models`]: the architectures, one file each, and their registry.
//! - [`Model`]: a loaded model (weights, architecture, tokenizer); [`Context`]: one sequence's
//!   KV cache on a backend, fed tokens in micro-batches.
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

pub use backend::{Backend, Batch, KvLayout};
pub use context::{Context, ContextParams};
pub use error::EngineError;
pub use model::Model;
pub use threading::{SequentialPool, ThreadPool};
