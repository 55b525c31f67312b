//! CPU kernels, one file per op named after it (`Op::MulWeight` → `mul_weight.rs`; attention's
//! f16 and f64 arithmetic in `attention/`), each with its scalar reference and tests, written
//! once over `tessera_quant::isa::Simd` where they have vector paths.

pub mod activation;
pub mod add;
pub mod add_id;
pub mod add_weight;
pub mod attention;
pub mod geglu;
pub mod get_rows;
pub mod moe_route;
pub mod moe_sum;
pub mod mul_mat;
pub mod mul_mat_id;
pub mod mul_weight;
pub mod output_rows;
pub mod reglu;
pub mod rms_norm;
pub mod rope;
pub mod scale;
pub mod slice;
pub mod softcap;
pub mod swiglu;
pub mod swiglu_oai;

/// A pool for the kernels' tests: every task, one per call, in reverse order (so that an
/// order effect or a task writing outside its rows would show).
#[cfg(test)]
pub(crate) struct ReversePool(pub usize);

#[cfg(test)]
impl tessera_core::threading::ThreadPool for ReversePool {
    fn n_threads(&self) -> usize {
        self.0
    }
    fn run(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        for i in (0..n).rev() {
            task(i);
        }
    }
}

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
