//! The backend the GPU backends' model tests (`tessera_conformance::models`) run here: Vulkan, on
//! the default device.

use tessera_backend_vulkan::VulkanBackend;
use tessera_core::backend::Backend;
use tessera_core::Model;

/// A backend with `model`'s weights uploaded.
pub fn model_backend(model: &Model) -> Box<dyn Backend> {
    let mut backend = VulkanBackend::new(None).expect("a Vulkan device (lavapipe in CI)");
    backend.upload_weights(model.weights()).unwrap();
    Box::new(backend)
}
