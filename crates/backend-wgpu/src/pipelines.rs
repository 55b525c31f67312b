//! Compute pipelines, compiled from the preprocessed WGSL on first use and cached with the
//! device by their key (family, entry point, defines).

use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::shaders::preprocess;
use tessera_gpu::GpuError;

use crate::device::{lock, Gpu};
use crate::error::WgpuError;

impl Gpu {
    /// The pipeline for `key`, compiled on first use.
    pub fn pipeline(&self, key: PipelineKey) -> Result<wgpu::ComputePipeline, WgpuError> {
        Ok(self.cached_pipeline(key)?)
    }

    /// Pipelines compiled so far.
    pub fn n_pipelines(&self) -> usize {
        lock(&self.pipelines).len()
    }

    /// [`Gpu::pipeline`] in the shared layer's terms (`tessera_gpu::Target::pipeline`).
    pub(crate) fn cached_pipeline(
        &self,
        key: PipelineKey,
    ) -> Result<wgpu::ComputePipeline, GpuError> {
        let mut cache = lock(&self.pipelines);
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let mut defines = key.defines.clone();
        if self.builtin_math() {
            defines.push(("BUILTIN_MATH", 1));
        }
        let text = preprocess(key.family, &defines)?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(key.family),
                source: wgpu::ShaderSource::Wgsl(text.into()),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(key.family),
                layout: None,
                module: &module,
                entry_point: Some(key.entry),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = self.pop_scope(scope) {
            return Err(GpuError::Shader {
                family: format!("{} {} {:?}", key.family, key.entry, key.defines),
                message: e.to_string(),
            });
        }
        cache.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}
