//! The backends the GPU backends' model tests (`tessera_conformance::models`) run here: Vulkan,
//! on the default device, as it comes and with the packed integer dot product matmuls on.

use tessera_backend_vulkan::{Gpu, VulkanBackend};
use tessera_core::backend::Backend;
use tessera_core::Model;

/// A backend with `model`'s weights uploaded.
pub fn model_backend(model: &Model) -> Box<dyn Backend> {
    let gpu = Gpu::new(None).expect("a Vulkan device (lavapipe in CI)");
    uploaded(model, gpu)
}

/// [`model_backend`] with the integer dot product matmuls (`Gpu::set_int_dot_kernels`, off by
/// default), on a device that has them: lavapipe in CI.
pub fn int_dot_model_backend(model: &Model) -> Box<dyn Backend> {
    let mut gpu = Gpu::new(None).expect("a Vulkan device (lavapipe in CI)");
    gpu.set_int_dot_kernels(true);
    assert!(
        gpu.int_dot_kernels(),
        "{} has no integer dot product: the int-dot model tests need one (lavapipe has)",
        gpu.device().name
    );
    uploaded(model, gpu)
}

fn uploaded(model: &Model, gpu: Gpu) -> Box<dyn Backend> {
    let mut backend = VulkanBackend::with_gpu(gpu);
    backend.upload_weights(model.weights()).unwrap();
    Box::new(backend)
}
