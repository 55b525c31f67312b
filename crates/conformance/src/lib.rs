//! The op conformance suite, in the style of llama.cpp's test-backend-ops, written once for
//! every GPU backend: every op of the model graphs, for every weight type and several shapes,
//! run on a backend under test and on the CPU backend and compared by normalized mean squared
//! error with a limit per op; index outputs (argmax) must match. Matmuls round activations
//! like ggml (Q8_0 / Q8_K / f16) on both; a GPU's Q8_1 differs only in the f16 rounding of
//! ggml's per-block sum term (NMSE ~2e-7), hence the quantized-matmul limit of 1e-6.
//!
//! Inputs come from a synthetic GGUF file ([`data`]): f32 tables looked up with GetRows (the
//! graphs' only source op) and weights of each type quantized with the `quant` crate.
//!
//! Each backend's `tests/conformance.rs` implements [`UnderTest`] (how to open its device,
//! skip without one, make a backend, its limits, other kernel paths that must give the same
//! bits) and lists the cases with [`conformance_tests!`]: [`op_conformance_tests!`] for the
//! cases every backend runs, then the ones that need a hook of its own ([`SplitsWeightBindings`],
//! [`CompilesKernels`]).
//!
//! [`models`] (native only) holds the GPU backends' end-to-end tests on the test models, which
//! their `tests/suite` binaries list with [`gpu_model_tests!`] and [`gpu_synth_tests!`].
//!
//! The cases are async so that they run natively (`cargo test`, blocking on each test) and
//! in headless Chromium through wasm-bindgen-test (`scripts/test-wasm-crate.sh`), where the
//! WebGPU backend reads back asynchronously and each step is awaited as the npm package's
//! worker does.

pub mod attention;
pub mod data;
pub mod device;
pub mod harness;
#[cfg(not(target_arch = "wasm32"))]
pub mod models;
pub mod moe;
pub mod ops;

use std::future::Future;
use std::task::Poll;

use tessera_core::backend::Backend;
use tessera_core::EngineError;

pub use harness::Case;
pub use tessera_kernels::Define;

#[cfg(not(target_arch = "wasm32"))]
#[doc(hidden)]
pub use pollster::block_on;
#[cfg(not(target_arch = "wasm32"))]
#[doc(hidden)]
pub use tessera_testkit;

/// A backend under test: its device and the hooks the cases drive it through.
pub trait UnderTest: Sized {
    type Backend: Backend;

    /// The device, or `None` to skip the test (after saying why: no CUDA device, say).
    fn open() -> impl Future<Output = Option<Self>>;

    /// A fresh backend on the device.
    fn backend(&self) -> Self::Backend;

    /// Backends on other kernel paths of the device whose outputs must equal
    /// [`UnderTest::backend`]'s bit for bit (WebGPU, Vulkan: the f32 kernels beside the f16
    /// ones). None by default.
    fn same_bits_backends(&self) -> Vec<Self::Backend> {
        Vec::new()
    }

    /// The NMSE limit of `case` on this backend; by default the case's own.
    fn limit(&self, case: &Case<'_>) -> f64 {
        case.limit
    }

    /// Runs one step (`call`: a compute on `backend`) to completion. By default a step must
    /// complete at once; a backend whose steps may be pending (WebGPU in the browser) awaits
    /// its read-back and calls again.
    fn until_ready(
        backend: &mut Self::Backend,
        mut call: impl FnMut(&mut Self::Backend) -> Result<Poll<()>, EngineError>,
    ) -> impl Future<Output = Result<(), EngineError>> {
        let done = call(backend).map(|step| {
            assert!(
                step.is_ready(),
                "{}: a step was pending on a backend that completes each at once",
                backend.name()
            );
        });
        std::future::ready(done)
    }
}

/// A device whose weights are bound to the kernels in bindings of a capped size.
pub trait SplitsWeightBindings: UnderTest {
    /// The same device with weights split into bindings of at most `bytes`.
    fn with_weight_binding_cap(&self, bytes: u64) -> Self;
}

/// A device that compiles the WGSL kernel files on demand.
pub trait CompilesKernels: UnderTest {
    /// Every kernel file (the includes left out), by name.
    fn kernel_files(&self) -> Vec<&'static str>;

    /// Compiles one variant of a kernel file.
    fn compile(
        &self,
        family: &'static str,
        entry: &'static str,
        defines: Vec<Define>,
    ) -> Result<(), Box<dyn std::error::Error>>;
}

/// One test per case, each opening `$under_test` (skipped when that answers `None`) and
/// running `$case(&under_test)`: natively blocking on it, in the browser (the calling crate's
/// `wasm-bindgen-test`) awaiting it.
#[macro_export]
macro_rules! conformance_tests {
    ($under_test:ty; $($name:ident => $case:path;)*) => {$(
        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            $crate::block_on(async {
                if let Some(under_test) = <$under_test as $crate::UnderTest>::open().await {
                    $case(&under_test).await
                }
            })
        }
        #[cfg(target_arch = "wasm32")]
        #[wasm_bindgen_test::wasm_bindgen_test]
        async fn $name() {
            if let Some(under_test) = <$under_test as $crate::UnderTest>::open().await {
                $case(&under_test).await
            }
        }
    )*};
}

/// The cases every backend runs: each op of the graphs, attention, the MoE ops, greedy ids.
#[macro_export]
macro_rules! op_conformance_tests {
    ($under_test:ty) => {
        $crate::conformance_tests! { $under_test;
            get_rows => $crate::ops::get_rows;
            mul_mat => $crate::ops::mul_mat;
            rms_norm => $crate::ops::rms_norm;
            mul_weight => $crate::ops::mul_weight;
            add_weight => $crate::ops::add_weight;
            add => $crate::ops::add;
            scale => $crate::ops::scale;
            swiglu => $crate::ops::swiglu;
            geglu => $crate::ops::geglu;
            softcap => $crate::ops::softcap;
            reglu => $crate::ops::reglu;
            swiglu_oai => $crate::ops::swiglu_oai;
            activation => $crate::ops::activation;
            output_rows => $crate::ops::output_rows;
            slice => $crate::ops::slice;
            rope => $crate::ops::rope;
            moe_route => $crate::moe::moe_route;
            mul_mat_id => $crate::moe::mul_mat_id;
            add_id => $crate::moe::add_id;
            moe_sum => $crate::moe::moe_sum;
            attention => $crate::attention::attention;
            attention_sliding_window_and_softcap =>
                $crate::attention::attention_sliding_window_and_softcap;
            attention_sinks => $crate::attention::attention_sinks;
            attention_head_dim_256 => $crate::attention::attention_head_dim_256;
            attention_after_context_shift => $crate::attention::attention_after_context_shift;
            argmax_on_the_gpu_matches_the_logits =>
                $crate::ops::argmax_on_the_gpu_matches_the_logits;
        }
    };
}
