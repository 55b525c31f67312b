//! Kernel variants as Vulkan compute pipelines: the WGSL family with its defines (the WebGPU
//! backend's preprocessor, so both backends run the same text), translated to SPIR-V by naga,
//! with a descriptor set layout read from the module's bindings (uniform or storage per
//! binding), created through a `VkPipelineCache` that is saved to disk, so the driver's
//! compilation (LLVM on lavapipe) is paid once per machine, not once per process.

use std::collections::HashMap;
use std::path::PathBuf;

use ash::vk;
use tessera_backend_wgpu::pipelines::PipelineKey;
use tessera_backend_wgpu::shaders::preprocess;

use crate::devices::{Features, PhysicalDevice};
use crate::error::{VkContext, VulkanError};

/// A compiled kernel variant.
#[derive(Clone, Copy)]
pub struct Pipeline {
    pub raw: vk::Pipeline,
    pub layout: vk::PipelineLayout,
    pub set_layout: vk::DescriptorSetLayout,
    /// Per binding (index = binding number): its descriptor type, if bound.
    pub kinds: [Option<vk::DescriptorType>; MAX_BINDINGS],
}

/// Bindings per kernel (the WGSL kernels use at most 8 of group 0).
pub const MAX_BINDINGS: usize = 12;

pub struct Pipelines {
    cache: vk::PipelineCache,
    /// Where the cache's data is saved, if anywhere.
    path: Option<PathBuf>,
    by_key: HashMap<PipelineKey, Pipeline>,
    /// Pipelines created since the cache was last saved.
    unsaved: usize,
    /// The SPIR-V capabilities the device's enabled features allow.
    capabilities: naga::FastHashSet<naga::back::spv::Capability>,
    features: Features,
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
            unsaved: 0,
            capabilities: capabilities(&info.features),
            features: info.features,
        })
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The pipeline for `key`, compiled on first use (`extra`: device-dependent defines).
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
        let text = preprocess(key.family, &defines)?;
        let name = || format!("{} {} {:?}", key.family, key.entry, key.defines);
        let (words, kinds) =
            spirv(&text, key.entry, &self.capabilities, &self.features).map_err(|message| {
                VulkanError::Shader {
                    family: name(),
                    message,
                }
            })?;
        let p = create(device, self.cache, &words, kinds, key.entry)?;
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
        for p in self.by_key.values() {
            device.destroy_pipeline(p.raw, None);
            device.destroy_pipeline_layout(p.layout, None);
            device.destroy_descriptor_set_layout(p.set_layout, None);
        }
        device.destroy_pipeline_cache(self.cache, None);
        self.by_key.clear();
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

/// SPIR-V of `entry` in the WGSL `text`, and each group-0 binding's descriptor type.
pub fn spirv(
    text: &str,
    entry: &str,
    capabilities: &naga::FastHashSet<naga::back::spv::Capability>,
    features: &Features,
) -> Result<(Vec<u32>, [Option<vk::DescriptorType>; MAX_BINDINGS]), String> {
    use naga::back::spv;
    let module = naga::front::wgsl::parse_str(text).map_err(|e| e.emit_to_string(text))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string(text))?;
    let ep = module
        .entry_points
        .iter()
        .position(|e| e.name == entry)
        .ok_or_else(|| format!("no entry point `{entry}`"))?;
    let uses = info.get_entry_point(ep);
    let mut kinds = [None; MAX_BINDINGS];
    // The layout holds what this entry point uses (as wgpu's automatic layouts do), which is
    // what the dispatch builders bind.
    for (handle, var) in module.global_variables.iter() {
        let Some(binding) = &var.binding else {
            continue;
        };
        if uses[handle].is_empty() {
            continue;
        }
        let kind = match var.space {
            naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
            naga::AddressSpace::Storage { .. } => vk::DescriptorType::STORAGE_BUFFER,
            other => return Err(format!("binding {} in {other:?}", binding.binding)),
        };
        let slot = kinds
            .get_mut(binding.binding as usize)
            .filter(|_| binding.group == 0)
            .ok_or_else(|| format!("binding {}:{}", binding.group, binding.binding))?;
        *slot = Some(kind);
    }
    // Out-of-range indices are clamped as WebGPU requires, exactly as wgpu does: buffer
    // accesses by the driver where it has robustBufferAccess2 (enabled by `Gpu::open`), else
    // by naga's clamps; so the kernels behave the same on both backends.
    let restrict = naga::proc::BoundsCheckPolicy::Restrict;
    let buffer = match features.robust_buffer_access2 {
        true => naga::proc::BoundsCheckPolicy::Unchecked,
        false => restrict,
    };
    let options = spv::Options {
        lang_version: (1, 3),
        zero_initialize_workgroup_memory: match features.zero_init_workgroup {
            true => spv::ZeroInitializeWorkgroupMemoryMode::Native,
            false => spv::ZeroInitializeWorkgroupMemoryMode::Polyfill,
        },
        flags: spv::WriterFlags::empty(),
        capabilities: Some(capabilities.clone()),
        // Compute shaders have no f16 inputs or outputs; naga would declare it regardless.
        use_storage_input_output_16: false,
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: restrict,
            buffer,
            image_load: restrict,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        },
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: entry.to_string(),
    };
    let words =
        spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| e.to_string())?;
    Ok((words, kinds))
}

/// What naga may use: core compute, and each optional feature where the device has it (and
/// the device was created with it, `gpu::Gpu::open`); naga polyfills the rest (e.g. 8-bit
/// packing without `shaderInt8`) or refuses the kernel.
fn capabilities(f: &Features) -> naga::FastHashSet<naga::back::spv::Capability> {
    use naga::back::spv::Capability as C;
    let mut caps: naga::FastHashSet<C> = [C::Shader].into_iter().collect();
    if f.f16 {
        caps.extend([C::Float16, C::StorageBuffer16BitAccess]);
    }
    if f.int8 {
        caps.insert(C::Int8);
    }
    if f.subgroup_arithmetic {
        caps.extend([C::GroupNonUniform, C::GroupNonUniformArithmetic]);
    }
    if f.int_dot {
        caps.extend([C::DotProduct, C::DotProductInput4x8BitPacked]);
    }
    caps
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
