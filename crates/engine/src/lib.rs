//! Tessera engine.
pub mod backend;
pub mod chat_template;
pub mod context;
pub mod cpu;
pub mod error;
pub mod generate;
pub mod graph;
pub mod model;
pub mod models;
pub mod perplexity;
pub mod sampling;
pub mod speculative;
pub mod spin_pool;
pub mod stop;
pub mod tensor;
pub mod threading;
pub mod tokenizer;
pub mod weights;

pub use context::{Context, ContextParams};
pub use error::EngineError;
pub use model::Model;
pub use spin_pool::SpinPool;
pub use threading::{SequentialPool, ThreadPool};
