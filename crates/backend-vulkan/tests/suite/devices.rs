//! Enumeration on the machine's real loader, and a missing loader as a typed error.

use tessera_backend_vulkan::devices::DeviceKind;
use tessera_backend_vulkan::enumerate;
use tessera_backend_vulkan::instance::Instance;
use tessera_backend_vulkan::VulkanError;

#[test]
fn lavapipe_is_listed_with_its_driver_uuid_and_features() {
    let list = enumerate::list().expect("a Vulkan loader (libvulkan1) and lavapipe");
    let lvp = list
        .iter()
        .find(|d| d.device.name.starts_with("llvmpipe"))
        .expect("lavapipe among the devices");
    assert_eq!(lvp.device.kind, DeviceKind::Cpu);
    assert!(
        lvp.device.driver_name.contains("llvmpipe"),
        "{}",
        lvp.device.driver_name
    );
    assert_ne!(lvp.device.uuid, [0; 16]);
    // Mesa 22's lavapipe: f16 arithmetic and subgroup arithmetic (the Vulkan-only variants).
    assert!(lvp.device.features.f16);
    assert!(lvp.device.features.subgroup_arithmetic);
    // ... which the kernels then use: f16 by default, subgroups on request (`subgroups.rs`).
    let mut gpu =
        tessera_backend_vulkan::Gpu::new(Some(list.iter().position(|d| d == lvp).unwrap()))
            .unwrap();
    assert!(gpu.f16_kernels(), "{}", gpu.describe());
    gpu.set_subgroup_kernels(true);
    assert!(gpu.subgroup_kernels(), "{}", gpu.describe());
}

#[test]
fn a_missing_loader_is_a_typed_error() {
    let err = Instance::with_loader(Some("/nonexistent/libvulkan.so.1".into()))
        .err()
        .expect("no instance without a loader");
    assert!(matches!(err, VulkanError::NoLoader(_)), "{err}");
}
