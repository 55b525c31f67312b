//! Reads every physical device's identity and the features the kernels use.

use ash::vk;

use crate::devices::{dedup, DeviceKind, Features, ListedDevice, PhysicalDevice};
use crate::error::{VkContext, VulkanError};
use crate::instance::{c_text, Instance, API_VERSION};

/// Every physical device the loader reports, in its order, with its handle.
pub fn physical_devices(
    instance: &Instance,
) -> Result<Vec<(vk::PhysicalDevice, PhysicalDevice)>, VulkanError> {
    // SAFETY: the instance is alive for the call.
    let handles =
        unsafe { instance.raw.enumerate_physical_devices() }.vk("vkEnumeratePhysicalDevices")?;
    Ok(handles
        .into_iter()
        .enumerate()
        .map(|(index, h)| (h, describe(instance, h, index)))
        .collect())
}

/// The de-duplicated list (`devices::dedup`) with each entry's handle.
pub fn listed_devices(
    instance: &Instance,
) -> Result<Vec<(vk::PhysicalDevice, ListedDevice)>, VulkanError> {
    let all = physical_devices(instance)?;
    let plain: Vec<PhysicalDevice> = all.iter().map(|(_, d)| d.clone()).collect();
    Ok(dedup(&plain)
        .into_iter()
        .map(|l| (all[l.device.index].0, l))
        .collect())
}

/// Opens the loader and lists the de-duplicated devices (what `tessera devices` prints).
pub fn list() -> Result<Vec<ListedDevice>, VulkanError> {
    let instance = Instance::new()?;
    Ok(listed_devices(&instance)?
        .into_iter()
        .map(|(_, l)| l)
        .collect())
}

fn describe(instance: &Instance, h: vk::PhysicalDevice, index: usize) -> PhysicalDevice {
    let raw = &instance.raw;
    // SAFETY: `h` is a handle this instance enumerated; the queries only fill the structs.
    let base = unsafe { raw.get_physical_device_properties(h) };
    // SAFETY: as above.
    let memory = unsafe { raw.get_physical_device_memory_properties(h) };
    let device_local: u64 = memory.memory_heaps[..memory.memory_heap_count as usize]
        .iter()
        .filter(|heap| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|heap| heap.size)
        .sum();
    let mut device = PhysicalDevice {
        index,
        name: c_text(base.device_name_as_c_str()),
        kind: DeviceKind::from_vk(base.device_type),
        driver_id: 0,
        driver_name: String::new(),
        driver_info: String::new(),
        uuid: [0; 16],
        api_version: base.api_version,
        memory: device_local,
        features: Features::default(),
    };
    if base.api_version < API_VERSION {
        // Without 1.2 there are no driver properties to chain; the device is listed, unusable.
        device.driver_name = "(Vulkan < 1.2)".into();
        return device;
    }
    let mut p11 = vk::PhysicalDeviceVulkan11Properties::default();
    let mut p12 = vk::PhysicalDeviceVulkan12Properties::default();
    let mut props = vk::PhysicalDeviceProperties2::default()
        .push_next(&mut p11)
        .push_next(&mut p12);
    // SAFETY: the chained structs live until the call returns; the device supports 1.2.
    unsafe { raw.get_physical_device_properties2(h, &mut props) };
    let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
    let mut fdot = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default();
    let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
    let mut robust2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
    let has_1_3 = base.api_version.min(instance.api_version) >= vk::API_VERSION_1_3;
    let has_robust2 = has_extension(instance, h, ash::ext::robustness2::NAME);
    let mut features = vk::PhysicalDeviceFeatures2::default()
        .push_next(&mut f11)
        .push_next(&mut f12);
    if has_1_3 {
        features = features.push_next(&mut fdot).push_next(&mut f13);
    }
    if has_robust2 {
        features = features.push_next(&mut robust2);
    }
    // SAFETY: as above.
    unsafe { raw.get_physical_device_features2(h, &mut features) };
    let f64 = features.features.shader_float64 == vk::TRUE;
    device.driver_id = p12.driver_id.as_raw();
    device.driver_name = c_text(p12.driver_name_as_c_str());
    device.driver_info = c_text(p12.driver_info_as_c_str());
    device.uuid = p11.device_uuid;
    let compute = p11
        .subgroup_supported_stages
        .contains(vk::ShaderStageFlags::COMPUTE);
    device.features = Features {
        f16: f12.shader_float16 == vk::TRUE && f11.storage_buffer16_bit_access == vk::TRUE,
        subgroup_arithmetic: compute
            && p11
                .subgroup_supported_operations
                .contains(vk::SubgroupFeatureFlags::ARITHMETIC),
        subgroup_size: p11.subgroup_size,
        int_dot: has_1_3 && fdot.shader_integer_dot_product == vk::TRUE,
        int8: f12.shader_int8 == vk::TRUE,
        f64,
        robust_buffer_access2: has_robust2 && robust2.robust_buffer_access2 == vk::TRUE,
        zero_init_workgroup: has_1_3 && f13.shader_zero_initialize_workgroup_memory == vk::TRUE,
    };
    device
}

/// Whether device `h` offers extension `name`.
pub fn has_extension(instance: &Instance, h: vk::PhysicalDevice, name: &std::ffi::CStr) -> bool {
    // SAFETY: a query on a physical device of this instance.
    unsafe { instance.raw.enumerate_device_extension_properties(h) }
        .unwrap_or_default()
        .iter()
        .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
}
