//! The op conformance suite (`tessera-conformance`: every op against the CPU backend) on the
//! Vulkan backend, on the default device (lavapipe in CI; `TESSERA_VULKAN_INT_DOT=1` reruns
//! it with the packed integer dot product matmuls). Steps are synchronous (never pending).
//! Where the device has shader-f16 the kernels take their f16 variants; the f32 path runs
//! alongside and must give the same bits.

use std::sync::OnceLock;

use tessera_backend_vulkan::{Gpu, VulkanBackend};
use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::shaders::kernel_files;
use tessera_conformance::{CompilesKernels, Define, SplitsWeightBindings, UnderTest};

/// The Vulkan device every test shares.
struct Vulkan(Gpu);

impl UnderTest for Vulkan {
    type Backend = VulkanBackend;

    async fn open() -> Option<Vulkan> {
        static GPU: OnceLock<Gpu> = OnceLock::new();
        let gpu = GPU.get_or_init(|| {
            let gpu = Gpu::new(None).expect("a Vulkan device (lavapipe in CI)");
            eprintln!("device: {}", gpu.describe());
            gpu
        });
        Some(Vulkan(gpu.clone()))
    }

    fn backend(&self) -> VulkanBackend {
        VulkanBackend::with_gpu(self.0.clone())
    }

    fn same_bits_backends(&self) -> Vec<VulkanBackend> {
        if !self.0.f16_kernels() {
            return Vec::new();
        }
        let mut f32_kernels = self.0.clone();
        f32_kernels.set_f16_kernels(false);
        vec![VulkanBackend::with_gpu(f32_kernels)]
    }
}

impl SplitsWeightBindings for Vulkan {
    fn with_weight_binding_cap(&self, bytes: u64) -> Vulkan {
        let mut g = self.0.clone();
        g.set_weight_binding_cap(Some(bytes));
        Vulkan(g)
    }
}

/// The kernels are the WebGPU backend's WGSL files, compiled to SPIR-V at build time: every
/// variant the suite compiles must be one the build prebuilt.
impl CompilesKernels for Vulkan {
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
    tessera_conformance::op_conformance_tests!(super::Vulkan);

    tessera_conformance::conformance_tests! { super::Vulkan;
        weights_split_across_bindings => tessera_conformance::device::weights_split_across_bindings;
        every_wgsl_file_compiles => tessera_conformance::device::every_kernel_file_compiles;
        graphs_of_one_shape_get_their_own_recording =>
            tessera_conformance::device::graphs_of_one_shape_get_their_own_recording;
    }
}
