//! Tessera's CPU backend: runs graphs node by node with the kernels in [`ops`], on the
//! injected thread pool, with buffers planned once per graph and reused from step to step.
//! The same code runs natively and in the browser (wasm SIMD128).

mod backend;
pub mod kv_cache;
mod matmul_nodes;
pub mod ops;
pub mod parallel;
mod profile;
mod repacked;
pub mod spin_pool;

pub use backend::{CpuBackend, TraceFn};
pub use spin_pool::{available_threads, SpinPool};
