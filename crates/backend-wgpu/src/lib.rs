//! Tessera's WebGPU backend: the engine's graphs on a wgpu device, with WGSL kernels from
//! `shaders/wgsl/` (one family per file, variants by defines, pipelines compiled on first use).
//!
//! Natively it runs on any Vulkan adapter (lavapipe, SwiftShader, real GPUs); in the browser
//! through wgpu's webgpu backend. Every kernel has an f32 path that needs no optional feature
//! (the KV cache holds f16 pairs packed with the core `pack2x16float`), and kernels with an
//! f16 variant take it where the adapter has `shader-f16`.

pub mod backend;
pub mod device;
pub mod error;
pub mod graph_walk;
pub mod kv;
pub mod ops;
pub mod pipelines;
pub mod profile;
pub mod recorder;
pub mod recording;
pub mod shaders;
pub mod target;
pub mod weight_stream;
pub mod weights;

pub use backend::WgpuBackend;
pub use device::Gpu;
pub use error::WgpuError;
pub use weight_stream::WeightStream;
