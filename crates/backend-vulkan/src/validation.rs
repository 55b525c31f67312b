//! The Khronos validation layer, on request: `TESSERA_VULKAN_VALIDATION=1` enables
//! `VK_LAYER_KHRONOS_validation` where it is installed (Debian: `vulkan-validationlayers`).
//! Its messages go to stderr, which is where the tests look for them.

use std::ffi::CStr;

const LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Whether validation was asked for.
pub fn requested() -> bool {
    std::env::var("TESSERA_VULKAN_VALIDATION").is_ok_and(|v| v == "1")
}

/// The layers to enable: the validation layer when requested and installed.
pub fn layers(entry: &ash::Entry) -> Vec<&'static CStr> {
    if !requested() {
        return Vec::new();
    }
    // SAFETY: a plain query of the loaded entry.
    let available = unsafe { entry.enumerate_instance_layer_properties() }.unwrap_or_default();
    let found = available
        .iter()
        .any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == LAYER));
    if found {
        vec![LAYER]
    } else {
        eprintln!("vulkan: TESSERA_VULKAN_VALIDATION=1 but {LAYER:?} is not installed");
        Vec::new()
    }
}
