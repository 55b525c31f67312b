//! The backend's typed errors. They reach the engine as `EngineError::Backend` (boxed, so a
//! caller can downcast to [`WgpuError`] and, e.g., recreate the backend after a device loss).

use tessera_core::EngineError;
use tessera_gguf::GgmlType;

#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    #[error("no WebGPU adapter: {0}")]
    NoAdapter(String),
    #[error("the adapter refused to create a device: {0}")]
    RequestDevice(String),
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    #[error("GPU out of memory allocating {what} ({bytes} bytes)")]
    OutOfMemory { what: String, bytes: u64 },
    #[error("{what} needs {bytes} bytes in one binding; the adapter allows {limit}")]
    BindingTooLarge {
        what: String,
        bytes: u64,
        limit: u64,
    },
    #[error("GPU validation error: {0}")]
    Validation(String),
    #[error("WGSL kernel '{family}' does not compile: {message}")]
    Shader { family: String, message: String },
    /// A backend with ahead-of-time kernels (Vulkan) was asked for a variant it did not
    /// build; the variant's canonical name.
    #[error("kernel variant `{0}` is not among the prebuilt ones")]
    NotPrebuilt(String),
    #[error("weight '{name}' has type {ty}, which the WebGPU backend does not compute with")]
    UnsupportedType { name: String, ty: GgmlType },
    #[error("unsupported by the WebGPU backend: {0}")]
    Unsupported(String),
    #[error("reading results back from the GPU failed: {0}")]
    ReadBack(String),
    #[error("the GPU did not finish within {0} s")]
    Timeout(u64),
}

impl From<WgpuError> for EngineError {
    fn from(e: WgpuError) -> EngineError {
        EngineError::Backend(Box::new(e))
    }
}
