//! The Khronos validation layer, on request: `TESSERA_VULKAN_VALIDATION=1` enables
//! `VK_LAYER_KHRONOS_validation` where it is installed (Debian: `vulkan-validationlayers`)
//! with a messenger that records its errors: the device's next check
//! ([`crate::Gpu::check`]) fails with [`crate::VulkanError::Validation`], so a test that
//! makes an invalid call fails instead of printing a line nobody reads.

use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use ash::vk;

const LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Error messages the layer reported and no check has returned yet (every device of the
/// process shares them: the layer reports per instance, and tests are one process).
static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether validation was asked for.
pub fn requested() -> bool {
    std::env::var("TESSERA_VULKAN_VALIDATION").is_ok_and(|v| v == "1")
}

/// The layers and instance extensions to enable: the validation layer and debug utils when
/// requested and installed.
pub fn layers(entry: &ash::Entry) -> (Vec<&'static CStr>, Vec<&'static CStr>) {
    if !requested() {
        return (Vec::new(), Vec::new());
    }
    // SAFETY: a plain query of the loaded entry.
    let available = unsafe { entry.enumerate_instance_layer_properties() }.unwrap_or_default();
    let found = available
        .iter()
        .any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == LAYER));
    if found {
        (vec![LAYER], vec![ash::ext::debug_utils::NAME])
    } else {
        eprintln!("vulkan: TESSERA_VULKAN_VALIDATION=1 but {LAYER:?} is not installed");
        (Vec::new(), Vec::new())
    }
}

/// Installs the messenger on `instance` (created with [`layers`]' extension).
pub fn messenger(
    entry: &ash::Entry,
    instance: &ash::Instance,
) -> Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)> {
    let utils = ash::ext::debug_utils::Instance::new(entry, instance);
    let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL,
        )
        .pfn_user_callback(Some(on_message));
    // SAFETY: the callback is a plain function; the messenger is destroyed with the instance.
    let m = unsafe { utils.create_debug_utils_messenger(&info, None) }.ok()?;
    Some((utils, m))
}

/// The first recorded error, taking them all.
pub fn take_error() -> Option<String> {
    let mut errors = ERRORS.lock().unwrap_or_else(|p| p.into_inner());
    let first = errors.first().cloned();
    errors.clear();
    first
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data whose message is a C string (or null).
    let text = unsafe {
        data.as_ref()
            .filter(|d| !d.p_message.is_null())
            .map(|d| CStr::from_ptr(d.p_message).to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    eprintln!("vulkan validation ({severity:?}): {text}");
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        ERRORS.lock().unwrap_or_else(|p| p.into_inner()).push(text);
    }
    vk::FALSE
}
