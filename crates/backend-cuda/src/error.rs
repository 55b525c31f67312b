//! The backend's typed errors. They reach the engine as `EngineError::Backend` (boxed, so a
//! caller can downcast to [`CudaError`]).

use tessera_core::EngineError;
use tessera_gguf::GgmlType;

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// libcuda (the driver's library) cannot be loaded: no NVIDIA driver on this machine.
    #[error("CUDA: no driver (libcuda.so.1 not found)")]
    NoDriver,
    #[error("CUDA: the driver reports no devices")]
    NoDevice,
    #[error("CUDA: device {0} does not exist")]
    BadOrdinal(usize),
    /// libnvrtc cannot be loaded: kernels cannot be compiled.
    #[error(
        "CUDA: NVRTC not found (libnvrtc.so.12: install a CUDA toolkit or the \
         nvidia-cuda-nvrtc-cu12 Python wheel, or set TESSERA_NVRTC to the library's path)"
    )]
    NoNvrtc,
    #[error("CUDA: cuBLAS not found (libcublas.so.12)")]
    NoCublas,
    #[error("CUDA driver: {0}")]
    Driver(String),
    #[error("CUDA kernel '{file}' does not compile for {arch}: {log}")]
    Compile {
        file: String,
        arch: String,
        log: String,
    },
    #[error("weight '{name}' has type {ty}, which the CUDA backend does not compute with")]
    UnsupportedType { name: String, ty: GgmlType },
    #[error("unsupported by the CUDA backend: {0}")]
    Unsupported(String),
}

impl From<cudarc::driver::DriverError> for CudaError {
    fn from(e: cudarc::driver::DriverError) -> CudaError {
        CudaError::Driver(e.to_string())
    }
}

impl From<CudaError> for EngineError {
    fn from(e: CudaError) -> EngineError {
        EngineError::Backend(Box::new(e))
    }
}
