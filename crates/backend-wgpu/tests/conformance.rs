//! Conformance suite in the style of llama.cpp's test-backend-ops: every op of the llama and
//! gemma3 graphs, for every weight type and several shapes, run on the WebGPU backend and on
//! the CPU backend and compared by normalized mean squared error with a limit per op; index
//! outputs (argmax) must match. Matmuls round activations like ggml (Q8_0 / Q8_K / f16) on
//! both; the GPU's Q8_1 differs only in the f16 rounding of ggml's per-block sum term
//! (NMSE ~2e-7), hence the quantized-matmul limit of 1e-6.
//!
//! Inputs come from a synthetic GGUF file: f32 tables looked up with GetRows (the graphs'
//! only source op) and weights of each type quantized with the `quant` crate.
//!
//! The harness is async so that the same cases run natively (`cargo test`, blocking on each
//! test) and in headless Chromium through wasm-bindgen-test (`scripts/test-wasm-crate.sh`),
//! where the backend reads back asynchronously and each step is awaited as the npm package's
//! worker does.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

#[path = "conformance/cases.rs"]
mod cases;
#[path = "conformance/wgpu.rs"]
mod under_test;
