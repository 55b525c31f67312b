//! The Vulkan backend under the shared conformance cases: one device for every test; steps
//! are synchronous (never pending).

use std::sync::OnceLock;
use std::task::Poll;

pub use tessera_backend_vulkan::Gpu;
pub use tessera_backend_vulkan::VulkanBackend as GpuBackend;
use tessera_core::EngineError;

pub async fn gpu() -> Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let gpu = Gpu::new(None).expect("a Vulkan device (lavapipe in CI)");
        eprintln!("device: {}", gpu.describe());
        gpu
    })
    .clone()
}

pub fn backend(g: Gpu) -> GpuBackend {
    GpuBackend::with_gpu(g)
}

pub async fn until_read_back(
    b: &mut GpuBackend,
    mut call: impl FnMut(&mut GpuBackend) -> Result<Poll<()>, EngineError>,
) -> Result<(), EngineError> {
    match call(b)? {
        Poll::Ready(()) => Ok(()),
        Poll::Pending => unreachable!("the Vulkan backend answers every step at once"),
    }
}
