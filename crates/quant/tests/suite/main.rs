//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short).

mod formats_api;
mod formats_kquant;
mod formats_python;
mod quantize_activation;
mod vec_dot_dequantized;
mod vec_dot_gemm;
mod vec_dot_gemv;
mod vec_dot_ggml_order;
mod vec_dot_kernels;
mod vec_dot_support;
mod vec_dot_wasm_bench;
mod vec_dot_x4;
