//! Errors of the browser surface, each with a stable `code` the JS API exposes as `error.code`.
//!
//! The codes are part of the package's API (documented in docs/js-api.md): callers branch on
//! them, so a variant's code never changes once published.

use tessera_core::sampling::SamplingError;
use tessera_core::EngineError;
use tessera_gguf::GgufError;
use tessera_runtime::generate::GenerateError;
use tessera_runtime::request::RequestError;
use tessera_runtime::speculative::SpecError;
use tessera_tokenizer::chat_template::ChatTemplateError;

/// The stable codes (the JS side adds `MODEL_FETCH_FAILED`, `ABORTED`, `UNLOADED`,
/// `UNSUPPORTED_BACKEND` and `WORKER_FAILED`, which only it can detect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The bytes are not a well-formed GGUF file (or split set).
    InvalidGguf,
    /// A well-formed GGUF file the engine cannot run: a tensor type it does not compute with.
    UnsupportedType,
    /// A well-formed GGUF file of an architecture the engine does not know.
    UnsupportedArchitecture,
    /// A GGUF file whose model is incomplete or inconsistent (missing tensors or keys, bad
    /// shapes, a broken tokenizer).
    InvalidModel,
    /// The prompt (or prompt plus generation) does not fit in the context.
    ContextFull,
    /// A bad option or argument (sampling option out of range, empty prompt, bad token id).
    InvalidArgument,
    /// Chat requested but the model has no template, or the template rejected the messages.
    ChatTemplate,
    /// The model does not fit in the memory the browser gives the page.
    OutOfMemory,
    /// A call that needs a generation in progress (or none) came at the wrong time.
    InvalidState,
    /// A device backend (WebGPU) failed: device lost, allocation refused.
    BackendError,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidGguf => "INVALID_GGUF",
            ErrorCode::UnsupportedType => "UNSUPPORTED_TYPE",
            ErrorCode::UnsupportedArchitecture => "UNSUPPORTED_ARCHITECTURE",
            ErrorCode::InvalidModel => "INVALID_MODEL",
            ErrorCode::ContextFull => "CONTEXT_FULL",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::ChatTemplate => "CHAT_TEMPLATE_ERROR",
            ErrorCode::OutOfMemory => "OUT_OF_MEMORY",
            ErrorCode::InvalidState => "INVALID_STATE",
            ErrorCode::BackendError => "BACKEND_ERROR",
        }
    }
}

/// An error with its code and a message for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WasmError {
    pub code: ErrorCode,
    pub message: String,
}

impl WasmError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> WasmError {
        WasmError {
            code,
            message: message.into(),
        }
    }
}

impl From<GgufError> for WasmError {
    fn from(e: GgufError) -> Self {
        WasmError::new(ErrorCode::InvalidGguf, format!("invalid GGUF: {e}"))
    }
}

impl From<EngineError> for WasmError {
    fn from(e: EngineError) -> Self {
        let code = match &e {
            EngineError::UnsupportedType { .. } => ErrorCode::UnsupportedType,
            EngineError::UnknownArchitecture(_) | EngineError::NotSupported(_) => {
                ErrorCode::UnsupportedArchitecture
            }
            EngineError::NoArchitecture
            | EngineError::MissingKey(_)
            | EngineError::BadKey { .. }
            | EngineError::MissingTensor(_)
            | EngineError::BadShape { .. }
            | EngineError::MissingTensorData { .. }
            | EngineError::Tokenizer(_) => ErrorCode::InvalidModel,
            EngineError::ContextFull { .. } => ErrorCode::ContextFull,
            EngineError::BadToken { .. } | EngineError::InvalidArgument(_) => {
                ErrorCode::InvalidArgument
            }
            // A quantization error at run time means weights the loader let through but the
            // kernels refuse: the model, not the caller, is at fault.
            EngineError::Quant(_) => ErrorCode::InvalidModel,
            EngineError::Backend(_) | EngineError::Threads(_) | EngineError::WeightsNotInMemory => {
                ErrorCode::BackendError
            }
            // The session drives its backend through the polling entry points; this means a
            // synchronous entry point was used on the asynchronous GPU backend.
            EngineError::AsynchronousBackend => ErrorCode::InvalidState,
        };
        WasmError::new(code, e.to_string())
    }
}

impl From<SamplingError> for WasmError {
    fn from(e: SamplingError) -> Self {
        WasmError::new(ErrorCode::InvalidArgument, e.to_string())
    }
}

/// A request the runtime's request model refuses (its message names the field).
impl From<RequestError> for WasmError {
    fn from(e: RequestError) -> Self {
        WasmError::new(ErrorCode::InvalidArgument, e.message)
    }
}

impl From<ChatTemplateError> for WasmError {
    fn from(e: ChatTemplateError) -> Self {
        WasmError::new(ErrorCode::ChatTemplate, e.to_string())
    }
}

impl From<SpecError> for WasmError {
    fn from(e: SpecError) -> Self {
        match e {
            SpecError::Engine(e) => e.into(),
            SpecError::Sampling(e) => e.into(),
            // Bad options, and the states a draftless speculator cannot reach in this host
            // (no cache files, no draft model).
            e => WasmError::new(ErrorCode::InvalidArgument, e.to_string()),
        }
    }
}

impl From<GenerateError> for WasmError {
    fn from(e: GenerateError) -> Self {
        match e {
            GenerateError::Engine(e) => e.into(),
            GenerateError::Sampling(e) => e.into(),
            GenerateError::ChatTemplate(e) => e.into(),
            GenerateError::NoChatTemplate => WasmError::new(ErrorCode::ChatTemplate, e.to_string()),
            GenerateError::EmptyPrompt
            | GenerateError::ControlTextInContent { .. }
            | GenerateError::ControlTextInTools
            | GenerateError::Grammar(_) => {
                WasmError::new(ErrorCode::InvalidArgument, e.to_string())
            }
            GenerateError::PromptTooLong { .. } => {
                WasmError::new(ErrorCode::ContextFull, e.to_string())
            }
            GenerateError::Speculative(e) => e.into(),
        }
    }
}
