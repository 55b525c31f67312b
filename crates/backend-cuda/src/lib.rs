//! Tessera's CUDA backend: the engine's graphs on an NVIDIA GPU through cudarc, with CUDA C
//! kernels from `shaders/cuda/` compiled at run time by NVRTC for the device's architecture.
//!
//! cudarc loads the driver (libcuda), NVRTC and cuBLAS with dlopen when first asked, so this
//! crate builds everywhere and, on a machine without a driver, every entry point answers
//! [`CudaError::NoDriver`] (see [`libs`]); nothing panics.

pub mod backend;
pub mod device;
pub mod error;
pub mod kernels;
pub mod kv;
pub mod libs;
pub mod ops;
pub mod probe;
pub mod step;
pub mod weights;

pub use backend::CudaBackend;
pub use error::CudaError;
pub use probe::{devices, DeviceInfo};
