//! Tessera's WebGPU backend: the engine's graphs on a wgpu device. The kernels, their dispatch
//! builders and the graph walk are the GPU layer's (`tessera_gpu`, shared with the Vulkan
//! backend); this crate is the wgpu side: the device, pipelines compiled from the
//! preprocessed WGSL on first use, buffers, bind groups, recordings and read-back.
//!
//! Natively it runs on any Vulkan adapter (lavapipe, SwiftShader, real GPUs); in the browser
//! through wgpu's webgpu backend. Every kernel has an f32 path that needs no optional feature
//! (the KV cache holds f16 pairs packed with the core `pack2x16float`), and kernels with an
//! f16 variant take it where the adapter has `shader-f16`.
//!
//! Modules form a DAG: `error` and `profile` at the bottom, then `device`, `pipelines`,
//! `target`, `dispatch`, `kv`, `weights`, `weight_stream`, `recording` and `backend`.

pub mod backend;
pub mod device;
pub mod dispatch;
pub mod error;
pub mod kv;
pub mod pipelines;
pub mod profile;
pub mod recording;
pub mod target;
pub mod weight_stream;
pub mod weights;

pub use backend::WgpuBackend;
pub use device::Gpu;
pub use error::WgpuError;
pub use weight_stream::WeightStream;
