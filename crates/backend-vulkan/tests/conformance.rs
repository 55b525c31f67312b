//! The op conformance suite (`tessera-conformance`: every op against the CPU backend) on the
//! Vulkan backend, on the default device (lavapipe in CI), as it comes and again with the packed
//! integer dot product matmuls on (`int_dot_cases`). Steps are synchronous (never pending).
//! Where the device has shader-f16 the kernels take their f16 variants; the f32 path runs
//! alongside and must give the same bits.

use std::sync::OnceLock;

use tessera_backend_vulkan::{Gpu, VulkanBackend};
use tessera_conformance::{CompilesKernels, Define, SplitsWeightBindings, UnderTest};
use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::shaders::kernel_files;

/// The Vulkan device every test shares; `INT_DOT`: with the integer dot product matmuls
/// (`Gpu::set_int_dot_kernels`, off by default) where the device has them, else its cases skip.
struct Vulkan<const INT_DOT: bool>(Gpu);

impl<const INT_DOT: bool> UnderTest for Vulkan<INT_DOT> {
    type Backend = VulkanBackend;

    async fn open() -> Option<Self> {
        // One static for both kinds: a generic function's statics are shared by its instances.
        static GPUS: [OnceLock<Gpu>; 2] = [OnceLock::new(), OnceLock::new()];
        let gpu = GPUS[INT_DOT as usize].get_or_init(|| {
            let mut gpu = Gpu::new(None).expect("a Vulkan device (lavapipe in CI)");
            gpu.set_int_dot_kernels(INT_DOT);
            eprintln!("device: {}", gpu.describe());
            gpu
        });
        // The model tests (`tests/suite/int_dot.rs`) insist on the integer matmuls; here a
        // device without them runs only the plain cases.
        if INT_DOT && !gpu.int_dot_kernels() {
            eprintln!(
                "no integer dot product on {}: int_dot_cases skipped",
                gpu.describe()
            );
            return None;
        }
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

impl<const INT_DOT: bool> SplitsWeightBindings for Vulkan<INT_DOT> {
    fn with_weight_binding_cap(&self, bytes: u64) -> Self {
        let mut g = self.0.clone();
        g.set_weight_binding_cap(Some(bytes));
        Vulkan(g)
    }
}

/// The kernels are the WebGPU backend's WGSL files, compiled to SPIR-V at build time: every
/// variant the suite compiles must be one the build prebuilt.
impl<const INT_DOT: bool> CompilesKernels for Vulkan<INT_DOT> {
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
    tessera_conformance::op_conformance_tests!(super::Vulkan<false>);

    tessera_conformance::conformance_tests! { super::Vulkan<false>;
        weights_split_across_bindings => tessera_conformance::device::weights_split_across_bindings;
        every_wgsl_file_compiles => tessera_conformance::device::every_kernel_file_compiles;
        graphs_of_one_shape_get_their_own_recording =>
            tessera_conformance::device::graphs_of_one_shape_get_their_own_recording;
    }
}

/// The cases every backend runs, with the integer dot product matmuls.
mod int_dot_cases {
    tessera_conformance::op_conformance_tests!(super::Vulkan<true>);
}
