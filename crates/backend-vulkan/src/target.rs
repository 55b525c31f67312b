//! The Vulkan device as a target of the shared dispatch builders (`tessera_gpu`'s `ops` and
//! `graph_walk`), and the binding of their recorded dispatches to descriptor sets.

use ash::vk;
use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::recorder::{Pending, Recorder, PARAMS_BYTES};
use tessera_gpu::{GpuError, Target};

use crate::buffer::{Buffer, Memory};
use crate::error::{VkContext, VulkanError};
use crate::gpu::{barrier, lock, Gpu};
use crate::pipelines::{Pipeline, MAX_BINDINGS};

impl Target for Gpu {
    type Buffer = Buffer;
    type Pipeline = Pipeline;

    fn pipeline(&self, key: PipelineKey) -> Result<Pipeline, GpuError> {
        let extra: &[(&str, u32)] = if self.builtin_math() {
            &[("BUILTIN_MATH", 1)]
        } else {
            &[]
        };
        lock(&self.inner.pipelines)
            .get(&self.inner.device, &key, extra)
            .map_err(|e| GpuError::from(self.note(e)))
    }
    fn is_cpu(&self) -> bool {
        Gpu::is_cpu(self)
    }
    fn f16_kernels(&self) -> bool {
        Gpu::f16_kernels(self)
    }
    fn max_workgroups_per_dimension(&self) -> u32 {
        self.inner.limits.max_compute_work_group_count[0]
            .min(self.inner.limits.max_compute_work_group_count[1])
    }
    fn uniform_offset_alignment(&self) -> u64 {
        self.inner.limits.min_uniform_buffer_offset_alignment
    }
    fn max_uniform_binding(&self) -> u64 {
        self.inner.limits.max_uniform_buffer_range as u64
    }
    fn profiled(&self) -> bool {
        false
    }
    fn subgroup_kernels(&self) -> bool {
        Gpu::subgroup_kernels(self)
    }
    fn int_dot_kernels(&self) -> bool {
        Gpu::int_dot_kernels(self)
    }
    fn exact_fma_kernels(&self) -> bool {
        self.device().features.f64
    }
}

/// One dispatch ready to encode.
pub struct Bound {
    pipeline: Pipeline,
    set: vk::DescriptorSet,
    groups: [u32; 3],
}

/// Recorded dispatches with their descriptor sets (from a pool sized for them) and the
/// parameter blocks' buffer.
pub struct Dispatches {
    gpu: Gpu,
    pool: vk::DescriptorPool,
    _params: Buffer,
    pub list: Vec<Bound>,
}

impl Drop for Dispatches {
    fn drop(&mut self) {
        // SAFETY: no submission is pending (each is waited for); the sets go with the pool.
        unsafe {
            self.gpu
                .inner
                .device
                .destroy_descriptor_pool(self.pool, None)
        };
    }
}

impl Dispatches {
    /// Binds what `rec` recorded: one descriptor set per dispatch, the parameter block at
    /// binding 0 (a uniform range of the shared parameter buffer), the buffers at theirs.
    pub fn bind(rec: Recorder<Gpu>) -> Result<Dispatches, VulkanError> {
        let gpu = rec.gpu.clone();
        let (params, pending) = rec.into_parts();
        let params_buf = Buffer::new(
            &gpu,
            "dispatch parameters",
            params.len() as u64,
            Memory::Host,
        )?;
        params_buf.write(0, &params);
        let d = &gpu.inner.device;
        let count = |kind| {
            pending
                .iter()
                .map(|p: &Pending<Gpu>| {
                    p.pipeline
                        .kinds
                        .iter()
                        .filter(|k| **k == Some(kind))
                        .count()
                })
                .sum::<usize>()
                .max(1) as u32
        };
        let sizes = [
            vk::DescriptorPoolSize::default()
                .ty(vk::DescriptorType::UNIFORM_BUFFER)
                .descriptor_count(count(vk::DescriptorType::UNIFORM_BUFFER)),
            vk::DescriptorPoolSize::default()
                .ty(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(count(vk::DescriptorType::STORAGE_BUFFER)),
        ];
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(pending.len().max(1) as u32)
            .pool_sizes(&sizes);
        // SAFETY: creating a pool on this device; it is destroyed by `Dispatches::drop`.
        let pool = unsafe { d.create_descriptor_pool(&info, None) }.vk("vkCreateDescriptorPool")?;
        let mut out = Dispatches {
            gpu: gpu.clone(),
            pool,
            _params: params_buf.clone(),
            list: Vec::with_capacity(pending.len()),
        };
        if pending.is_empty() {
            return Ok(out);
        }
        let layouts: Vec<_> = pending.iter().map(|p| p.pipeline.set_layout).collect();
        let alloc = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: the pool was sized for these sets above.
        let sets = unsafe { d.allocate_descriptor_sets(&alloc) }.vk("vkAllocateDescriptorSets")?;
        for (p, set) in pending.into_iter().zip(sets) {
            let mut infos = Vec::with_capacity(MAX_BINDINGS);
            infos.push((
                0u32,
                vk::DescriptorBufferInfo::default()
                    .buffer(params_buf.raw())
                    .offset(p.params_at)
                    .range(PARAMS_BYTES),
            ));
            for (binding, buffer) in &p.buffers {
                infos.push((
                    *binding,
                    vk::DescriptorBufferInfo::default()
                        .buffer(buffer.raw())
                        .offset(0)
                        .range(vk::WHOLE_SIZE),
                ));
            }
            let mut writes = Vec::with_capacity(infos.len());
            for (binding, info) in &infos {
                let Some(kind) = p.pipeline.kinds.get(*binding as usize).copied().flatten() else {
                    continue; // not used by this entry point
                };
                writes.push(
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(*binding)
                        .descriptor_type(kind)
                        .buffer_info(std::slice::from_ref(info)),
                );
            }
            // SAFETY: the buffers outlive the set (the recordings keep them); the writes'
            // infos live until the call returns.
            unsafe { d.update_descriptor_sets(&writes, &[]) };
            out.list.push(Bound {
                pipeline: p.pipeline,
                set,
                groups: p.groups,
            });
        }
        Ok(out)
    }

    /// Encodes the dispatches, each followed by a barrier.
    pub fn encode(&self, d: &ash::Device, cb: vk::CommandBuffer) {
        for b in &self.list {
            // SAFETY: `cb` is recording; the pipeline and set are alive (held by the device's
            // cache and this value).
            unsafe {
                d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, b.pipeline.raw);
                d.cmd_bind_descriptor_sets(
                    cb,
                    vk::PipelineBindPoint::COMPUTE,
                    b.pipeline.layout,
                    0,
                    &[b.set],
                    &[],
                );
                d.cmd_dispatch(cb, b.groups[0], b.groups[1], b.groups[2]);
            }
            barrier(d, cb);
        }
    }
}
