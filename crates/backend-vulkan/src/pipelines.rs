//! Kernel variants as Vulkan compute pipelines: the prebuilt SPIR-V of the variant
//! (`kernels`: compiled by build.rs from the GPU layer's WGSL, which the WebGPU backend runs) for the
//! device's profile, with the descriptor set layout build.rs read from the module's bindings
//! (uniform or storage per binding), created through a `VkPipelineCache` that is saved to
//! disk, so the driver's compilation (LLVM on lavapipe) is paid once per machine, not once
//! per process.

use std::collections::HashMap;
use std::path::PathBuf;

use ash::vk;
use tessera_gpu::pipelines::PipelineKey;

use crate::devices::PhysicalDevice;
use crate::error::{VkContext, VulkanError};
use crate::kernels;
pub use crate::kernels::MAX_BINDINGS;

/// A compiled kernel variant.
#[derive(Clone, Copy)]
pub struct Pipeline {
    pub raw: vk::Pipeline,
    pub layout: vk::PipelineLayout,
    pub set_layout: vk::DescriptorSetLayout,
    /// Per binding (index = binding number): its descriptor type, if bound.
    pub kinds: [Option<vk::DescriptorType>; MAX_BINDINGS],
}

pub struct Pipelines {
    cache: vk::PipelineCache,
    /// Where the cache's data is saved, if anywhere.
    path: Option<PathBuf>,
    by_key: HashMap<PipelineKey, Pipeline>,
    /// The pipelines, by the variant's canonical name (requests that differ only in defines
    /// their kernel does not read share one).
    by_name: HashMap<&'static str, Pipeline>,
    /// Pipelines created since the cache was last saved.
    unsaved: usize,
    /// The device's profile (`kernels::profile_bits`): which of each variant's modules.
    profile: u8,
}

impl Pipelines {
    pub fn new(device: &ash::Device, info: &PhysicalDevice) -> Result<Pipelines, VulkanError> {
        let path = cache_path(info);
        let data = path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .unwrap_or_default();
        let create = |data: &[u8]| {
            let ci = vk::PipelineCacheCreateInfo::default().initial_data(data);
            // SAFETY: `data` outlives the call; a driver ignores data of another device or
            // version (the header says which), so a stale file only costs a recompile.
            unsafe { device.create_pipeline_cache(&ci, None) }
        };
        let cache = match create(&data) {
            Ok(c) => c,
            // A corrupt file: start empty.
            Err(_) => create(&[]).vk("vkCreatePipelineCache")?,
        };
        Ok(Pipelines {
            cache,
            path,
            by_key: HashMap::new(),
            by_name: HashMap::new(),
            unsaved: 0,
            profile: kernels::profile_bits(&info.features),
        })
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The variants created so far, by canonical name.
    pub fn names(&self) -> Vec<&'static str> {
        self.by_name.keys().copied().collect()
    }

    /// The pipeline for `key`, created on first use from its prebuilt SPIR-V (`extra`:
    /// device-dependent defines); [`VulkanError::NotPrebuilt`] if build.rs did not build it.
    pub fn get(
        &mut self,
        device: &ash::Device,
        key: &PipelineKey,
        extra: &[(&'static str, u32)],
    ) -> Result<Pipeline, VulkanError> {
        if let Some(p) = self.by_key.get(key) {
            return Ok(*p);
        }
        let mut defines = key.defines.clone();
        defines.extend_from_slice(extra);
        let name = kernels::name_of(key.family, key.entry, &defines)?;
        let kernel = kernels::find(&name)?;
        if let Some(p) = self.by_name.get(kernel.name) {
            self.by_key.insert(key.clone(), *p);
            return Ok(*p);
        }
        let words = kernel.words(self.profile)?;
        let p = create(
            device,
            self.cache,
            &words,
            kernel.descriptor_kinds(),
            kernel.entry,
        )?;
        self.by_name.insert(kernel.name, p);
        self.by_key.insert(key.clone(), p);
        self.unsaved += 1;
        Ok(p)
    }

    /// Writes the pipeline cache to disk if pipelines were added since the last save. A
    /// failure to write is not an error: the cache is only a speed-up.
    pub fn save(&mut self, device: &ash::Device) {
        let Some(path) = &self.path else { return };
        if self.unsaved == 0 {
            return;
        }
        // SAFETY: a query of a live cache.
        if let Ok(data) = unsafe { device.get_pipeline_cache_data(self.cache) } {
            let tmp = path.with_extension("tmp");
            let ok = path
                .parent()
                .is_some_and(|dir| std::fs::create_dir_all(dir).is_ok())
                && std::fs::write(&tmp, &data).is_ok()
                && std::fs::rename(&tmp, path).is_ok();
            if ok {
                self.unsaved = 0;
            }
        }
    }

    /// Destroys every pipeline (the device is going).
    ///
    /// # Safety
    /// No submission using them may be pending.
    pub unsafe fn destroy(&mut self, device: &ash::Device) {
        self.save(device);
        for p in self.by_name.values() {
            device.destroy_pipeline(p.raw, None);
            device.destroy_pipeline_layout(p.layout, None);
            device.destroy_descriptor_set_layout(p.set_layout, None);
        }
        device.destroy_pipeline_cache(self.cache, None);
        self.by_key.clear();
        self.by_name.clear();
    }
}

/// `$TESSERA_VULKAN_CACHE_DIR` or `$XDG_CACHE_HOME/tessera/vulkan` (`~/.cache/...`), one
/// file per device and driver version. `TESSERA_VULKAN_CACHE_DIR=` (empty) turns it off.
fn cache_path(info: &PhysicalDevice) -> Option<PathBuf> {
    let dir = match std::env::var_os("TESSERA_VULKAN_CACHE_DIR") {
        Some(d) if d.is_empty() => return None,
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
        }
        .join("tessera/vulkan"),
    };
    Some(dir.join(format!("pipelines-{}.bin", info.uuid_string())))
}

fn create(
    device: &ash::Device,
    cache: vk::PipelineCache,
    words: &[u32],
    kinds: [Option<vk::DescriptorType>; MAX_BINDINGS],
    entry: &str,
) -> Result<Pipeline, VulkanError> {
    let bindings: Vec<_> = kinds
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            k.map(|k| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(k)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
        })
        .collect();
    let entry =
        std::ffi::CString::new(entry).map_err(|_| VulkanError::Unsupported("entry name".into()))?;
    // SAFETY: every create-info below lives until its call returns; on an error the objects
    // created so far are destroyed.
    unsafe {
        let set_layout = device
            .create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                None,
            )
            .vk("vkCreateDescriptorSetLayout")?;
        let set_layouts = [set_layout];
        let layout = match device.create_pipeline_layout(
            &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
            None,
        ) {
            Ok(l) => l,
            Err(e) => {
                device.destroy_descriptor_set_layout(set_layout, None);
                return Err(VulkanError::from_vk("vkCreatePipelineLayout", e));
            }
        };
        let cleanup = || {
            device.destroy_pipeline_layout(layout, None);
            device.destroy_descriptor_set_layout(set_layout, None);
        };
        let module = match device
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
        {
            Ok(m) => m,
            Err(e) => {
                cleanup();
                return Err(VulkanError::from_vk("vkCreateShaderModule", e));
            }
        };
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(&entry);
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout)];
        let created = device.create_compute_pipelines(cache, &info, None);
        device.destroy_shader_module(module, None);
        match created {
            Ok(p) => Ok(Pipeline {
                raw: p[0],
                layout,
                set_layout,
                kinds,
            }),
            Err((_, e)) => {
                cleanup();
                Err(VulkanError::from_vk("vkCreateComputePipelines", e))
            }
        }
    }
}
