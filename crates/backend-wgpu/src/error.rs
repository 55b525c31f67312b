//! The backend's typed errors. They reach the engine as `EngineError::Backend` (boxed, so a
//! caller can downcast to [`WgpuError`] and, e.g., recreate the backend after a device loss).

use tessera_core::EngineError;
use tessera_gguf::GgmlType;
use tessera_gpu::GpuError;

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

/// The shared layer's errors in the WebGPU backend's terms (each has its own variant here).
impl From<GpuError> for WgpuError {
    fn from(e: GpuError) -> WgpuError {
        match e {
            GpuError::DeviceLost(why) => WgpuError::DeviceLost(why),
            GpuError::OutOfMemory { what, bytes } => WgpuError::OutOfMemory { what, bytes },
            GpuError::BindingTooLarge { what, bytes, limit } => {
                WgpuError::BindingTooLarge { what, bytes, limit }
            }
            GpuError::Validation(e) => WgpuError::Validation(e),
            GpuError::Shader { family, message } => WgpuError::Shader { family, message },
            // wgpu compiles every variant on first use: nothing is prebuilt to be missing.
            GpuError::NotPrebuilt(name) => WgpuError::Shader {
                family: name,
                message: "not among the prebuilt kernels".into(),
            },
            GpuError::UnsupportedType { name, ty } => WgpuError::UnsupportedType { name, ty },
            GpuError::Unsupported(what) => WgpuError::Unsupported(what),
            // The wgpu target raises only the shared layer's errors; another backend's error
            // keeps its message.
            GpuError::Device(e) => match e.downcast::<WgpuError>() {
                Ok(e) => *e,
                Err(e) => WgpuError::Validation(e.to_string()),
            },
        }
    }
}
