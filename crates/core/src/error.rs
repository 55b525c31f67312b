//! The engine's typed errors.

use tessera_gguf::GgmlType;

/// Everything that can go wrong loading a model or running it.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the model file has no general.architecture")]
    NoArchitecture,
    #[error("unknown architecture '{0}' (supported: {list})", list = crate::models::supported())]
    UnknownArchitecture(String),
    #[error("missing metadata key '{0}'")]
    MissingKey(String),
    #[error("metadata key '{key}' has a bad value: {why}")]
    BadKey { key: String, why: String },
    #[error("not supported yet: {0}")]
    NotSupported(String),
    #[error("missing tensor '{0}'")]
    MissingTensor(String),
    #[error("tensor '{name}' has shape {got:?}, expected {expected:?}")]
    BadShape {
        name: String,
        got: Vec<u64>,
        expected: Vec<u64>,
    },
    #[error("tensor '{name}' has type {ty}, which the engine cannot compute with")]
    UnsupportedType { name: String, ty: GgmlType },
    #[error("tensor '{name}': its bytes are missing from the file")]
    MissingTensorData { name: String },
    #[error("the model's weights were loaded into a device, not into memory: the CPU backend cannot run it")]
    WeightsNotInMemory,
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("context full: {needed} positions needed, the context holds {n_ctx}")]
    ContextFull { needed: usize, n_ctx: usize },
    #[error("token id {id} is out of range (vocabulary of {n_vocab})")]
    BadToken { id: u32, n_vocab: usize },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("cannot start the thread pool's workers: {0}")]
    Threads(String),
    #[error("quantization: {0}")]
    Quant(#[from] tessera_quant::QuantError),
    /// A device backend's own typed error (e.g. `tessera_backend_wgpu::WgpuError`), kept whole so
    /// callers can downcast it.
    #[error("{0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// A synchronous entry point ([`crate::Context::decode`] and its kin) was called on a
    /// backend that reads results back asynchronously: such a backend is driven through the
    /// polling entry points ([`crate::Context::poll_decode`] and its kin).
    #[error("the backend reads results back asynchronously: drive it with Context::poll_decode and its kin")]
    AsynchronousBackend,
}
