//! The GPU layer's typed errors: shapes and types a kernel refuses, and what a backend's
//! device reports while the shared builders run (through [`crate::Target::pipeline`]). Each
//! backend's own error wraps or maps them (`WgpuError`, `VulkanError`).

use tessera_gguf::GgmlType;

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
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
    #[error("weight '{name}' has type {ty}, which the GPU kernels do not compute with")]
    UnsupportedType { name: String, ty: GgmlType },
    #[error("unsupported by the GPU kernels: {0}")]
    Unsupported(String),
    /// A backend's own error raised inside the shared builders (by its `Target`), carried
    /// through them unchanged so that the backend gets it back whole (`VulkanError`).
    #[error(transparent)]
    Device(Box<dyn std::error::Error + Send + Sync>),
}
