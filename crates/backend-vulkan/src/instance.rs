//! The Vulkan loader and instance. The loader is opened at run time (ash's `loaded`), so a
//! machine without `libvulkan.so.1` gets [`VulkanError::NoLoader`] rather than a binary that
//! does not start; `TESSERA_VULKAN_LOADER` names another loader library (tests point it at a
//! missing file to check that path).

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;

use crate::error::{VkContext, VulkanError};

/// The lowest API version the backend uses (timeline-free, but 1.2's properties and
/// features chains, driver ids and 16-bit storage).
pub const API_VERSION: u32 = vk::API_VERSION_1_2;

/// An instance with its loader; dropped last (devices hold an `Arc` of it).
pub struct Instance {
    pub entry: ash::Entry,
    pub raw: ash::Instance,
    /// The API version the instance was created for: the loader's, at most 1.3 (a device's
    /// effective version is the lower of this and its own).
    pub api_version: u32,
    /// The validation messenger, when validation is on.
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

impl Instance {
    /// Opens the loader (`TESSERA_VULKAN_LOADER` or the system's) and creates an instance
    /// for API [`API_VERSION`].
    pub fn new() -> Result<Arc<Instance>, VulkanError> {
        Instance::with_loader(std::env::var_os("TESSERA_VULKAN_LOADER"))
    }

    /// [`Instance::new`] with the loader library at `loader` (`None`: the system's).
    pub fn with_loader(loader: Option<std::ffi::OsString>) -> Result<Arc<Instance>, VulkanError> {
        let entry = load_entry(loader)?;
        // SAFETY: the entry's function pointers come from a loaded Vulkan loader.
        let version = unsafe { entry.try_enumerate_instance_version() }
            .vk("vkEnumerateInstanceVersion")?
            .unwrap_or(vk::API_VERSION_1_0);
        if version < API_VERSION {
            return Err(VulkanError::NoDevice(format!(
                "the Vulkan loader offers API {}, the backend needs 1.2",
                version_string(version)
            )));
        }
        let api_version = version.min(vk::API_VERSION_1_3);
        let app = vk::ApplicationInfo::default()
            .application_name(c"tessera")
            .engine_name(c"tessera")
            .api_version(api_version);
        let (layers, extensions) = crate::validation::layers(&entry);
        let layer_ptrs: Vec<_> = layers.iter().map(|l| l.as_ptr()).collect();
        let extension_ptrs: Vec<_> = extensions.iter().map(|e| e.as_ptr()).collect();
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layer_ptrs)
            .enabled_extension_names(&extension_ptrs);
        // SAFETY: `info` and everything it points to live until the call returns.
        let raw = unsafe { entry.create_instance(&info, None) }.vk("vkCreateInstance")?;
        let messenger = (!layers.is_empty())
            .then(|| crate::validation::messenger(&entry, &raw))
            .flatten();
        Ok(Arc::new(Instance {
            entry,
            raw,
            api_version,
            messenger,
        }))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device created from this instance holds an `Arc` of it, so none is
        // left when the last reference goes.
        unsafe {
            if let Some((utils, m)) = self.messenger.take() {
                utils.destroy_debug_utils_messenger(m, None);
            }
            self.raw.destroy_instance(None)
        };
    }
}

fn load_entry(loader: Option<std::ffi::OsString>) -> Result<ash::Entry, VulkanError> {
    let result = match loader {
        // SAFETY: loading a library runs its initialisers; a Vulkan loader's are benign.
        Some(path) => unsafe { ash::Entry::load_from(path) },
        // SAFETY: as above, for the system's libvulkan.so.1.
        None => unsafe { ash::Entry::load() },
    };
    result.map_err(|e| VulkanError::NoLoader(e.to_string()))
}

/// "major.minor.patch" of a Vulkan version number.
pub fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

/// A fixed-size C string field of a Vulkan struct, as text.
pub fn c_text(field: Result<&CStr, std::ffi::FromBytesUntilNulError>) -> String {
    field
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}
