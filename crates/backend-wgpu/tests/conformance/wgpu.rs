//! The WebGPU backend under the shared conformance cases: one device for every test, and in
//! the browser asynchronous read-back (the only kind there).

use std::sync::OnceLock;
use std::task::Poll;

use tessera_backend_wgpu::Gpu;
pub use tessera_backend_wgpu::WgpuBackend as GpuBackend;
use tessera_core::EngineError;

pub async fn gpu() -> Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    if let Some(g) = GPU.get() {
        return g.clone();
    }
    let gpu = Gpu::new()
        .await
        .expect("a WebGPU adapter (lavapipe in CI, SwiftShader in Chromium)");
    eprintln!("adapter: {}", gpu.describe());
    // Tests starting at once may each create one; the first stored is shared from then on.
    GPU.get_or_init(|| gpu).clone()
}

/// A backend on `g`; in the browser with asynchronous read-back (the only kind there).
pub fn backend(g: Gpu) -> GpuBackend {
    #[allow(unused_mut)]
    let mut b = GpuBackend::with_gpu(g);
    #[cfg(target_arch = "wasm32")]
    b.set_async_read_back(true);
    b
}

/// Runs `call` on the GPU backend, awaiting the read-back and repeating the call while the
/// step is pending (the browser), as the npm package's worker does.
pub async fn until_read_back(
    b: &mut GpuBackend,
    mut call: impl FnMut(&mut GpuBackend) -> Result<Poll<()>, EngineError>,
) -> Result<(), EngineError> {
    loop {
        match call(b)? {
            Poll::Pending => b.gpu().read_back_signal().ready().await,
            Poll::Ready(()) => return Ok(()),
        }
    }
}
