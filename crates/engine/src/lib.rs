//! Tessera engine.
pub mod sampling;
pub mod stop;
pub mod generate;
pub mod perplexity;
pub mod speculative;
pub mod tokenizer;
pub mod chat_template;
pub mod backend;
pub mod context;
pub mod cpu;
pub mod error;
pub mod graph;
pub mod model;
pub mod models;
pub mod tensor;
pub mod threading;
pub mod weights;

pub use context::{Context, ContextParams};
pub use error::EngineError;
pub use model::Model;
pub use threading::{SequentialPool, ThreadPool};
