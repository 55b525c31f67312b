//! CPU kernels, one op family per file, each with its scalar reference and tests.

pub mod attention;
#[cfg(target_arch = "x86_64")]
pub mod attention_avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod attention_simd128;
pub mod binary;
pub mod f16_arith;
pub mod get_rows;
pub mod glu;
#[cfg(target_arch = "x86_64")]
pub mod glu_avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod glu_simd128;
pub mod mul_mat;
pub mod rms_norm;
pub mod rope;
