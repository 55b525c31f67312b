//! CPU kernels, one file per op named after it (`Op::MulWeight` → `mul_weight.rs`), each with
//! its scalar reference and tests; SIMD variants in `<op>_avx2.rs` / `<op>_simd128.rs`. `glu.rs`
//! holds both gated activations (`Op::Swiglu`, `Op::Geglu`) and their SIMD files.

pub mod add;
pub mod attention;
#[cfg(target_arch = "x86_64")]
pub mod attention_avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod attention_simd128;
pub mod f16_arith;
pub mod get_rows;
pub mod glu;
#[cfg(target_arch = "x86_64")]
pub mod glu_avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod glu_simd128;
pub mod mul_mat;
pub mod mul_weight;
pub mod rms_norm;
pub mod rope;
pub mod scale;
pub mod softcap;
