//! Vulkan physical devices as the user sees them, and the de-duplication rule: one GPU can be
//! exposed by two drivers (e.g. AMD's own driver and Mesa's RADV); the same device UUID seen
//! through two *different* drivers is one device, listed once with the better driver. The same
//! UUID on the *same* driver stays two entries: identical GPUs may share a UUID there, and
//! hiding one would hide a GPU.

use ash::vk;

/// How a physical device computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Discrete,
    Integrated,
    Virtual,
    Cpu,
    Other,
}

impl DeviceKind {
    pub fn from_vk(t: vk::PhysicalDeviceType) -> DeviceKind {
        match t {
            vk::PhysicalDeviceType::DISCRETE_GPU => DeviceKind::Discrete,
            vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceKind::Integrated,
            vk::PhysicalDeviceType::VIRTUAL_GPU => DeviceKind::Virtual,
            vk::PhysicalDeviceType::CPU => DeviceKind::Cpu,
            _ => DeviceKind::Other,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            DeviceKind::Discrete => "discrete GPU",
            DeviceKind::Integrated => "integrated GPU",
            DeviceKind::Virtual => "virtual GPU",
            DeviceKind::Cpu => "CPU",
            DeviceKind::Other => "other",
        }
    }
}

/// The optional features the kernels use where a device has them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// `shaderFloat16` + 16-bit storage: the f16 kernel variants.
    pub f16: bool,
    /// Subgroup arithmetic in compute shaders: subgroup reductions.
    pub subgroup_arithmetic: bool,
    pub subgroup_size: u32,
    /// `shaderIntegerDotProduct` (Vulkan 1.3 / VK_KHR_shader_integer_dot_product).
    pub int_dot: bool,
    /// `shaderInt8`: naga's 8-bit packing built-ins run natively (else its polyfills).
    pub int8: bool,
    /// `shaderFloat64`: the integer dot product kernel's exact fused multiply-adds
    /// (`EXACT_FMA`; lavapipe splits `fma` into a multiply and an add).
    pub f64: bool,
    /// `robustBufferAccess2` (VK_EXT_robustness2): the driver bounds-checks buffer accesses
    /// as WebGPU requires, so the kernels need no clamps of their own (as wgpu does).
    pub robust_buffer_access2: bool,
    /// `shaderZeroInitializeWorkgroupMemory` (1.3): the driver zeroes workgroup memory.
    pub zero_init_workgroup: bool,
}

impl Features {
    /// "f16, subgroups(8), int-dot, f64" — the features the backend will use.
    pub fn describe(&self) -> String {
        let mut words = Vec::new();
        if self.f16 {
            words.push("f16".to_string());
        }
        if self.subgroup_arithmetic {
            words.push(format!("subgroups({})", self.subgroup_size));
        }
        if self.int_dot {
            words.push("int-dot".to_string());
        }
        if self.f64 {
            words.push("f64".to_string());
        }
        if words.is_empty() {
            "none".to_string()
        } else {
            words.join(", ")
        }
    }
}

/// One physical device as a driver reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct PhysicalDevice {
    /// Its index in `vkEnumeratePhysicalDevices`' order.
    pub index: usize,
    pub name: String,
    pub kind: DeviceKind,
    /// `VkDriverId` (raw), its name and the driver's version text.
    pub driver_id: i32,
    pub driver_name: String,
    pub driver_info: String,
    pub uuid: [u8; 16],
    pub api_version: u32,
    /// Bytes of the device-local heaps.
    pub memory: u64,
    pub features: Features,
}

impl PhysicalDevice {
    /// The UUID as 8-4-4-4-12 hex digits.
    pub fn uuid_string(&self) -> String {
        let hex: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}

/// A device of the de-duplicated list, and the drivers it was also seen through.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedDevice {
    pub device: PhysicalDevice,
    /// Names of the other drivers that expose this device (not used).
    pub also_via: Vec<String>,
}

/// How much a driver is preferred for a device several drivers expose: the GPU vendor's own
/// driver first, then Mesa's hardware drivers, then translation layers, then software
/// rasterizers. Unknown drivers rank with Mesa's.
pub fn driver_rank(driver_id: i32) -> u32 {
    match vk::DriverId::from_raw(driver_id) {
        vk::DriverId::AMD_PROPRIETARY
        | vk::DriverId::NVIDIA_PROPRIETARY
        | vk::DriverId::INTEL_PROPRIETARY_WINDOWS
        | vk::DriverId::IMAGINATION_PROPRIETARY
        | vk::DriverId::QUALCOMM_PROPRIETARY
        | vk::DriverId::ARM_PROPRIETARY
        | vk::DriverId::BROADCOM_PROPRIETARY
        | vk::DriverId::SAMSUNG_PROPRIETARY => 4,
        vk::DriverId::AMD_OPEN_SOURCE => 3,
        vk::DriverId::MOLTENVK | vk::DriverId::MESA_DOZEN | vk::DriverId::MESA_VENUS => 1,
        vk::DriverId::MESA_LLVMPIPE | vk::DriverId::GOOGLE_SWIFTSHADER => 0,
        _ => 2,
    }
}

/// The seed's rule over `devices` (in enumeration order): a UUID seen through several drivers
/// becomes one entry, the best-ranked driver's (the first on a tie), which keeps the position
/// of that UUID's first entry; entries sharing a UUID *and* a driver all stay.
pub fn dedup(devices: &[PhysicalDevice]) -> Vec<ListedDevice> {
    let mut out: Vec<ListedDevice> = Vec::new();
    // Per UUID already placed: the index in `out` of each of its driver's entries.
    for d in devices {
        let same_uuid: Vec<usize> = (0..out.len())
            .filter(|&i| out[i].device.uuid == d.uuid)
            .collect();
        if same_uuid.is_empty()
            || same_uuid
                .iter()
                .any(|&i| out[i].device.driver_id == d.driver_id)
        {
            // A new device, or another GPU behind the same driver with the same UUID.
            out.push(ListedDevice {
                device: d.clone(),
                also_via: Vec::new(),
            });
            continue;
        }
        // Seen through another driver: keep whichever ranks higher.
        let kept = same_uuid[0];
        if driver_rank(d.driver_id) > driver_rank(out[kept].device.driver_id) {
            let old = std::mem::replace(&mut out[kept].device, d.clone());
            out[kept].also_via.push(old.driver_name);
        } else {
            out[kept].also_via.push(d.driver_name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(index: usize, uuid: u8, driver: vk::DriverId, driver_name: &str) -> PhysicalDevice {
        PhysicalDevice {
            index,
            name: format!("GPU {uuid}"),
            kind: DeviceKind::Discrete,
            driver_id: driver.as_raw(),
            driver_name: driver_name.into(),
            driver_info: String::new(),
            uuid: [uuid; 16],
            api_version: vk::API_VERSION_1_3,
            memory: 8 << 30,
            features: Features::default(),
        }
    }

    #[test]
    fn one_uuid_through_two_drivers_is_one_device_with_the_better_driver() {
        let list = [
            dev(0, 1, vk::DriverId::MESA_RADV, "radv"),
            dev(1, 1, vk::DriverId::AMD_PROPRIETARY, "AMD proprietary"),
        ];
        let out = dedup(&list);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].device.index, 1);
        assert_eq!(out[0].device.driver_name, "AMD proprietary");
        assert_eq!(out[0].also_via, ["radv"]);
        // Order of enumeration does not change which driver wins.
        let out = dedup(&[list[1].clone(), list[0].clone()]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].device.index, 1);
        assert_eq!(out[0].also_via, ["radv"]);
    }

    #[test]
    fn one_uuid_on_one_driver_stays_two_gpus() {
        let list = [
            dev(0, 7, vk::DriverId::NVIDIA_PROPRIETARY, "NVIDIA"),
            dev(1, 7, vk::DriverId::NVIDIA_PROPRIETARY, "NVIDIA"),
        ];
        let out = dedup(&list);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|d| d.also_via.is_empty()));
    }

    #[test]
    fn distinct_uuids_stay_in_order_and_a_tie_keeps_the_first() {
        let list = [
            dev(0, 1, vk::DriverId::MESA_LLVMPIPE, "llvmpipe"),
            dev(
                1,
                2,
                vk::DriverId::INTEL_OPEN_SOURCE_MESA,
                "Intel open-source Mesa driver",
            ),
            dev(2, 2, vk::DriverId::MESA_TURNIP, "turnip"), // same rank: the first stays
            dev(3, 3, vk::DriverId::NVIDIA_PROPRIETARY, "NVIDIA"),
            dev(4, 3, vk::DriverId::MESA_NVK, "NVK"),
            dev(5, 3, vk::DriverId::NVIDIA_PROPRIETARY, "NVIDIA"), // a second GPU, same UUID
        ];
        let out = dedup(&list);
        let picked: Vec<usize> = out.iter().map(|d| d.device.index).collect();
        assert_eq!(picked, [0, 1, 3, 5]);
        assert_eq!(out[1].also_via, ["turnip"]);
        assert_eq!(out[2].also_via, ["NVK"]);
        assert!(out[3].also_via.is_empty());
    }

    #[test]
    fn software_and_translation_drivers_rank_below_hardware_ones() {
        assert!(
            driver_rank(vk::DriverId::MESA_RADV.as_raw())
                > driver_rank(vk::DriverId::MESA_DOZEN.as_raw())
        );
        assert!(
            driver_rank(vk::DriverId::MESA_DOZEN.as_raw())
                > driver_rank(vk::DriverId::MESA_LLVMPIPE.as_raw())
        );
        assert!(
            driver_rank(vk::DriverId::AMD_PROPRIETARY.as_raw())
                > driver_rank(vk::DriverId::AMD_OPEN_SOURCE.as_raw())
        );
    }

    #[test]
    fn uuids_print_as_8_4_4_4_12() {
        let mut d = dev(0, 0, vk::DriverId::MESA_RADV, "radv");
        d.uuid = *b"\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef";
        assert_eq!(d.uuid_string(), "01234567-89ab-cdef-0123-456789abcdef");
    }
}
