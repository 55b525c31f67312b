//! Tessera's Vulkan backend on `ash`: the GPU layer's kernels (`tessera_gpu`, shared with the
//! WebGPU backend: the WGSL of `shaders/wgsl/`, compiled to SPIR-V by naga in build.rs), on any Vulkan 1.2 device, with the
//! Vulkan-only variants (subgroups, f16, integer dot products) where the device has them.
//!
//! Device choice follows the seed's rule (`devices::dedup`): a GPU exposed by two drivers is
//! listed once, with the better driver.

pub mod backend;
pub mod buffer;
pub mod devices;
pub mod enumerate;
pub mod error;
pub mod gpu;
pub mod instance;
pub mod kernels;
pub mod pipelines;
pub mod recording;
pub mod target;
pub mod validation;

pub use backend::VulkanBackend;
pub use devices::{ListedDevice, PhysicalDevice};
pub use error::VulkanError;
pub use gpu::Gpu;
