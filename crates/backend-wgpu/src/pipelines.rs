//! Compute pipelines, compiled on first use and cached by (family, entry point, defines).

use std::collections::HashMap;

use crate::device::Gpu;
use crate::error::WgpuError;
use crate::shaders::{preprocess, Define};

/// What makes a pipeline distinct.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub family: &'static str,
    pub entry: &'static str,
    pub defines: Vec<Define>,
}

/// Lives with the device ([`Gpu::pipeline`]), so every backend on it shares the compiled
/// pipelines.
#[derive(Default)]
pub struct PipelineCache {
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
}

impl PipelineCache {
    pub fn len(&self) -> usize {
        self.pipelines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pipelines.is_empty()
    }

    pub fn get(&mut self, gpu: &Gpu, key: PipelineKey) -> Result<wgpu::ComputePipeline, WgpuError> {
        if let Some(p) = self.pipelines.get(&key) {
            return Ok(p.clone());
        }
        let mut defines = key.defines.clone();
        if gpu.builtin_math() {
            defines.push(("BUILTIN_MATH", 1));
        }
        let text = preprocess(key.family, &defines)?;
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = gpu
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(key.family),
                source: wgpu::ShaderSource::Wgsl(text.into()),
            });
        let pipeline = gpu
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(key.family),
                layout: None,
                module: &module,
                entry_point: Some(key.entry),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = gpu.pop_scope(scope) {
            return Err(WgpuError::Shader {
                family: format!("{} {} {:?}", key.family, key.entry, key.defines),
                message: e.to_string(),
            });
        }
        self.pipelines.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}
