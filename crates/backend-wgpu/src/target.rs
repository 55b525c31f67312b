//! The wgpu device as a target of the shared dispatch builders (`tessera_gpu`'s `ops` and
//! `graph_walk`).

use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::{GpuError, Target};

use crate::device::Gpu;

impl Target for Gpu {
    type Buffer = wgpu::Buffer;
    type Pipeline = wgpu::ComputePipeline;

    fn pipeline(&self, key: PipelineKey) -> Result<wgpu::ComputePipeline, GpuError> {
        self.cached_pipeline(key)
    }
    fn is_cpu(&self) -> bool {
        Gpu::is_cpu(self)
    }
    fn f16_kernels(&self) -> bool {
        Gpu::f16_kernels(self)
    }
    fn max_workgroups_per_dimension(&self) -> u32 {
        self.limits.max_compute_workgroups_per_dimension
    }
    fn uniform_offset_alignment(&self) -> u64 {
        self.limits.min_uniform_buffer_offset_alignment as u64
    }
    fn max_uniform_binding(&self) -> u64 {
        self.limits.max_uniform_buffer_binding_size
    }
    fn profiled(&self) -> bool {
        self.profile().is_some()
    }
}
