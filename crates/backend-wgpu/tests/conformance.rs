//! The op conformance suite (`tessera-conformance`: every op against the CPU backend) on the
//! WebGPU backend: natively (lavapipe or SwiftShader in CI) and in headless Chromium through
//! wasm-bindgen-test, where read-back is asynchronous. Where the adapter has shader-f16 the
//! kernels take their f16 variants; the f32 path runs alongside and must give the same bits.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use std::sync::OnceLock;
use std::task::Poll;

use tessera_backend_wgpu::{Gpu, WgpuBackend};
use tessera_conformance::{CompilesKernels, Define, SplitsWeightBindings, UnderTest};
use tessera_core::EngineError;
use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::shaders::kernel_files;

/// The WebGPU device every test shares.
struct WebGpu(Gpu);

impl UnderTest for WebGpu {
    type Backend = WgpuBackend;

    async fn open() -> Option<WebGpu> {
        static GPU: OnceLock<Gpu> = OnceLock::new();
        if let Some(g) = GPU.get() {
            return Some(WebGpu(g.clone()));
        }
        let gpu = Gpu::new()
            .await
            .expect("a WebGPU adapter (lavapipe in CI, SwiftShader in Chromium)");
        eprintln!("adapter: {}", gpu.describe());
        // Tests starting at once may each create one; the first stored is shared from then on.
        Some(WebGpu(GPU.get_or_init(|| gpu).clone()))
    }

    /// In the browser with asynchronous read-back (the only kind there).
    fn backend(&self) -> WgpuBackend {
        #[allow(unused_mut)]
        let mut b = WgpuBackend::with_gpu(self.0.clone());
        #[cfg(target_arch = "wasm32")]
        b.set_async_read_back(true);
        b
    }

    fn same_bits_backends(&self) -> Vec<WgpuBackend> {
        if !self.0.f16_kernels() {
            return Vec::new();
        }
        let mut f32_kernels = self.0.clone();
        f32_kernels.set_f16_kernels(false);
        vec![WebGpu(f32_kernels).backend()]
    }

    /// Awaits the read-back and repeats the call while the step is pending (the browser), as
    /// the npm package's worker does.
    async fn until_ready(
        b: &mut WgpuBackend,
        mut call: impl FnMut(&mut WgpuBackend) -> Result<Poll<()>, EngineError>,
    ) -> Result<(), EngineError> {
        loop {
            match call(b)? {
                Poll::Pending => b.gpu().read_back_signal().ready().await,
                Poll::Ready(()) => return Ok(()),
            }
        }
    }
}

impl SplitsWeightBindings for WebGpu {
    fn with_weight_binding_cap(&self, bytes: u64) -> WebGpu {
        let mut g = self.0.clone();
        g.set_weight_binding_cap(Some(bytes));
        WebGpu(g)
    }
}

impl CompilesKernels for WebGpu {
    fn kernel_files(&self) -> Vec<&'static str> {
        kernel_files().collect()
    }

    fn compile(
        &self,
        family: &'static str,
        entry: &'static str,
        defines: Vec<Define>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let key = PipelineKey {
            family,
            entry,
            defines,
        };
        self.0.pipeline(key)?;
        Ok(())
    }
}

/// The cases every backend runs, and those of the GPU-API backends' own machinery.
mod cases {
    tessera_conformance::op_conformance_tests!(super::WebGpu);

    tessera_conformance::conformance_tests! { super::WebGpu;
        weights_split_across_bindings => tessera_conformance::device::weights_split_across_bindings;
        every_wgsl_file_compiles => tessera_conformance::device::every_kernel_file_compiles;
        graphs_of_one_shape_get_their_own_recording =>
            tessera_conformance::device::graphs_of_one_shape_get_their_own_recording;
    }
}
