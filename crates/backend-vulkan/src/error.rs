//! The backend's typed errors. They reach the engine as `EngineError::Backend` (boxed, so a
//! caller can downcast to [`VulkanError`], e.g. to fall back to the CPU or recreate the
//! backend after a device loss).

use ash::vk;
use tessera_core::EngineError;
use tessera_gpu::GpuError;

#[derive(Debug, thiserror::Error)]
pub enum VulkanError {
    #[error("no Vulkan loader (libvulkan.so.1): {0}")]
    NoLoader(String),
    #[error("no usable Vulkan device: {0}")]
    NoDevice(String),
    #[error("the Vulkan device was lost during {0}")]
    DeviceLost(&'static str),
    #[error("Vulkan out of {kind} memory during {call}")]
    OutOfMemory {
        call: &'static str,
        kind: &'static str,
    },
    #[error("{call} failed: {result}")]
    Call {
        call: &'static str,
        result: vk::Result,
    },
    #[error("the GPU did not finish within {0} s")]
    Timeout(u64),
    #[error("Vulkan out of memory allocating {what} ({bytes} bytes)")]
    Allocation { what: String, bytes: u64 },
    /// A kernel variant that build.rs did not compile to SPIR-V (`kernels::KERNELS`): its
    /// canonical name (`family:entry DEFINES`), and the device properties asked for.
    #[error("kernel variant `{0}` is not among the prebuilt SPIR-V (a bug: tessera_kernels::variants must list every variant the builders request)")]
    NotPrebuilt(String),
    /// An error of the shared GPU layer (a shape or type a kernel refuses) without a
    /// Vulkan meaning of its own.
    #[error(transparent)]
    Kernel(GpuError),
    #[error("Vulkan validation error: {0}")]
    Validation(String),
    #[error("unsupported by the Vulkan backend: {0}")]
    Unsupported(String),
}

impl VulkanError {
    /// The typed error of a failed Vulkan call: device loss and out-of-memory get their own
    /// variants (callers react to them), everything else names the call.
    pub fn from_vk(call: &'static str, result: vk::Result) -> VulkanError {
        match result {
            vk::Result::ERROR_DEVICE_LOST => VulkanError::DeviceLost(call),
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => VulkanError::OutOfMemory {
                call,
                kind: "device",
            },
            vk::Result::ERROR_OUT_OF_HOST_MEMORY => VulkanError::OutOfMemory { call, kind: "host" },
            result => VulkanError::Call { call, result },
        }
    }
}

/// `.vk("vkCall")` on an ash result: the typed error naming the call.
pub trait VkContext<T> {
    fn vk(self, call: &'static str) -> Result<T, VulkanError>;
}

impl<T> VkContext<T> for Result<T, vk::Result> {
    fn vk(self, call: &'static str) -> Result<T, VulkanError> {
        self.map_err(|r| VulkanError::from_vk(call, r))
    }
}

impl VulkanError {
    /// The Vulkan meaning of a GPU-layer error: a Vulkan error that crossed the shared
    /// builders comes back as it was; device loss, out-of-memory, a missing prebuilt variant
    /// and what the backend does not support keep their own variants.
    pub fn from_kernel(e: GpuError) -> VulkanError {
        match e {
            GpuError::Device(e) => match e.downcast::<VulkanError>() {
                Ok(e) => *e,
                Err(e) => VulkanError::Kernel(GpuError::Device(e)),
            },
            GpuError::DeviceLost(_) => VulkanError::DeviceLost("a kernel's creation"),
            GpuError::OutOfMemory { what, bytes } => VulkanError::Allocation { what, bytes },
            GpuError::NotPrebuilt(name) => VulkanError::NotPrebuilt(name),
            GpuError::Unsupported(what) => VulkanError::Unsupported(what),
            e => VulkanError::Kernel(e),
        }
    }
}

impl From<GpuError> for VulkanError {
    fn from(e: GpuError) -> VulkanError {
        VulkanError::from_kernel(e)
    }
}

/// A Vulkan failure inside the shared builders (a pipeline's creation, a buffer they asked
/// for), in the GPU layer's terms: a missing prebuilt variant is the layer's own; any other
/// error travels whole ([`VulkanError::from_kernel`] unwraps it).
impl From<VulkanError> for GpuError {
    fn from(e: VulkanError) -> GpuError {
        match e {
            VulkanError::Kernel(k) => k,
            VulkanError::NotPrebuilt(name) => GpuError::NotPrebuilt(name),
            e => GpuError::Device(Box::new(e)),
        }
    }
}

impl From<VulkanError> for EngineError {
    fn from(e: VulkanError) -> EngineError {
        EngineError::Backend(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_loss_and_out_of_memory_are_their_own_variants() {
        let lost = VulkanError::from_vk("vkQueueSubmit", vk::Result::ERROR_DEVICE_LOST);
        assert!(matches!(lost, VulkanError::DeviceLost("vkQueueSubmit")));
        let oom = VulkanError::from_vk("vkAllocateMemory", vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
        assert!(matches!(
            oom,
            VulkanError::OutOfMemory { kind: "device", .. }
        ));
        let other = VulkanError::from_vk("vkCreateBuffer", vk::Result::ERROR_UNKNOWN);
        assert!(other.to_string().starts_with("vkCreateBuffer failed"));
    }

    #[test]
    fn vulkan_errors_cross_the_shared_builders_unchanged() {
        let oom = VulkanError::from_vk(
            "vkCreateComputePipelines",
            vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        );
        let back = VulkanError::from_kernel(GpuError::from(oom));
        assert!(matches!(
            back,
            VulkanError::OutOfMemory {
                call: "vkCreateComputePipelines",
                kind: "host"
            }
        ));
        let lost =
            VulkanError::from_kernel(GpuError::from(VulkanError::DeviceLost("vkQueueSubmit")));
        assert!(matches!(lost, VulkanError::DeviceLost("vkQueueSubmit")));
        let unsupported =
            VulkanError::from_kernel(GpuError::from(VulkanError::Unsupported("x".into())));
        assert_eq!(
            unsupported.to_string(),
            "unsupported by the Vulkan backend: x"
        );
    }
}
