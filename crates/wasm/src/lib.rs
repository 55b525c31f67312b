//! Tessera in the browser: the wasm-bindgen surface the npm package (web/) runs in a Web Worker.
//!
//! The logic is plain Rust, tested natively: [`loader`] receives a model chunk by chunk
//! (`gpu_loader`, with the `webgpu` feature, straight into GPU buffers),
//! [`session`] generates one token per call (so the worker can stream tokens and hear aborts),
//! [`options`] checks option objects, [`errors`] gives every failure a stable code. `bindings`
//! (wasm32 only) exports them to JS; with the `threads` feature the kernels run on a
//! wasm-bindgen-rayon pool.

pub mod chat;
pub mod errors;
#[cfg(feature = "webgpu")]
pub mod gpu_loader;
pub mod loader;
pub mod options;
pub mod session;

#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(all(target_arch = "wasm32", feature = "threads"))]
mod rayon_pool;

#[cfg(all(target_arch = "wasm32", feature = "threads"))]
pub use wasm_bindgen_rayon::init_thread_pool;
