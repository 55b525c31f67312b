//! Opening the Vulkan backend for `--backend vulkan` and `--backend auto`.

use anyhow::Context as _;
use tessera_backend_vulkan::{Gpu, VulkanBackend};
use tessera_core::Model;

/// The Vulkan backend on `device` (`tessera devices`' number; `None`: the default choice)
/// with `model`'s weights on it. `hardware_only` (auto): a software device (lavapipe) is
/// refused, since the CPU backend is faster than a CPU emulating a GPU.
pub fn backend(
    model: &Model,
    device: Option<usize>,
    hardware_only: bool,
) -> anyhow::Result<VulkanBackend> {
    let gpu = Gpu::new(device).context("cannot open a Vulkan device")?;
    if hardware_only && device.is_none() && gpu.is_cpu() {
        anyhow::bail!(
            "the only Vulkan device is a software one ({}); choose it with --backend vulkan",
            gpu.device().name
        );
    }
    eprintln!("vulkan: {}", gpu.describe());
    let mut vk = VulkanBackend::with_gpu(gpu);
    vk.upload_weights(model.weights())
        .context("cannot place the weights on the Vulkan device")?;
    Ok(vk)
}
