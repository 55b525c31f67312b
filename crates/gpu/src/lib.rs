//! Tessera's GPU layer: everything the WebGPU backend (wgpu) and the Vulkan backend (ash)
//! share, with no GPU API of its own. The WGSL kernels of `shaders/wgsl/` and their
//! preprocessor (`shaders`), one dispatch builder per op (`ops`) and the graph walk over them
//! (`graph_walk`), generic over a [`Target`] (what a backend's device says about itself and
//! how it compiles a kernel variant), the recorder of dispatches (`recorder`), the KV cache's
//! layout (`kv`) and the placement of weights in bindings (`weights`), each generic over the
//! API's buffer type.
//!
//! Modules form a DAG: `error`, `pipelines` (pipeline keys) and `readout` at the bottom, then
//! `shaders`, `target`, `recorder`, `kv`, `weights`, `ops` and `graph_walk` on top.

pub mod error;
pub mod graph_walk;
pub mod kv;
pub mod ops;
pub mod pipelines;
pub mod readout;
pub mod recorder;
pub mod shaders;
pub mod target;
pub mod weights;

pub use error::GpuError;
pub use target::Target;
