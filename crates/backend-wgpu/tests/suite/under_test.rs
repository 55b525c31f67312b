//! The backend the GPU backends' model tests (`tessera_conformance::models`) run here: WebGPU.

use tessera_backend_wgpu::WgpuBackend;
use tessera_core::backend::Backend;
use tessera_core::Model;

/// A backend with `model`'s weights uploaded.
pub fn model_backend(model: &Model) -> Box<dyn Backend> {
    let mut backend = WgpuBackend::new().expect("a WebGPU adapter (lavapipe in CI)");
    backend.upload_weights(model.weights()).unwrap();
    Box::new(backend)
}
