//! ggml block quantization formats: quantize, dequantize and vec-dot kernels.

pub mod blocks;
