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
pub mod mul_mat;
pub mod norm;
pub mod rope;

/// Operands for the kernels' tests.
#[cfg(test)]
pub(crate) mod test_rng {
    /// splitmix64: enough randomness for the tests without a dev-dependency.
    pub(crate) fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
