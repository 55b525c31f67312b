//! A recording's dispatches bound for wgpu: the parameter blocks in one uniform buffer (at
//! the recorder's aligned offsets) and a bind group per dispatch; encoding them into a
//! compute pass.

use std::num::NonZeroU64;

use tessera_gpu::recorder::{Recorder, PARAMS_BYTES};

use crate::device::Gpu;
use crate::error::WgpuError;

/// One recorded compute dispatch.
pub struct Dispatch {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub groups: [u32; 3],
    /// The kernel variant's name, for the profile (`tessera_gpu::pipelines::kernel_name`);
    /// empty when the device is not profiled.
    pub kernel: String,
}

/// Binds what `rec` recorded: creates the parameter buffer and the bind groups.
pub fn bind(rec: Recorder<Gpu>) -> Result<Vec<Dispatch>, WgpuError> {
    let gpu = rec.gpu;
    let (param_bytes, pending) = rec.into_parts();
    let params = gpu.buffer(
        "dispatch parameters",
        param_bytes.len() as u64,
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        false,
    )?;
    gpu.queue.write_buffer(&params, 0, &param_bytes);
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let mut out = Vec::with_capacity(pending.len());
    for p in pending {
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &params,
                offset: p.params_at,
                size: NonZeroU64::new(PARAMS_BYTES),
            }),
        }];
        for (binding, buffer) in &p.buffers {
            entries.push(wgpu::BindGroupEntry {
                binding: *binding,
                resource: buffer.as_entire_binding(),
            });
        }
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &p.pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        out.push(Dispatch {
            pipeline: p.pipeline,
            bind_group,
            groups: p.groups,
            kernel: p.kernel,
        });
    }
    if let Some(e) = gpu.pop_scope(scope) {
        return Err(WgpuError::Validation(e.to_string()));
    }
    Ok(out)
}

/// Encodes `dispatches` into one compute pass.
pub fn encode(encoder: &mut wgpu::CommandEncoder, dispatches: &[Dispatch]) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some("graph"),
        timestamp_writes: None,
    });
    for d in dispatches {
        pass.set_pipeline(&d.pipeline);
        pass.set_bind_group(0, &d.bind_group, &[]);
        pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
    }
}
