//! Records a graph's dispatches once per graph shape: each dispatch gets its pipeline, its
//! 64-byte parameter block (all blocks live in one uniform buffer at aligned offsets) and its
//! bind group. Replaying a recording only re-encodes it; nothing is created per step.

use std::num::NonZeroU64;

use crate::device::Gpu;
use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::profile::kernel_name;
use crate::target::Target;

/// Bytes of one dispatch's parameter block (`struct Params` in every kernel, padded to this
/// size; build.rs checks it). Each op's parameters are a `#[repr(C)]` bytemuck struct whose
/// fields mirror, in order, the WGSL struct's fields before the padding, with a const
/// assertion of its size against the generated `shaders::wgsl_params` constant of its file.
pub const PARAMS_BYTES: u64 = 64;

/// One recorded compute dispatch.
pub struct Dispatch {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub groups: [u32; 3],
    /// The kernel variant's name, for the profile (`profile::kernel_name`); empty when the
    /// device is not profiled.
    pub kernel: String,
}

/// A dispatch recorded but not yet bound: each API turns these into its own bind groups or
/// descriptor sets ([`Recorder::finish`] for wgpu).
pub struct Pending<T: Target> {
    pub pipeline: T::Pipeline,
    pub kernel: String,
    /// Offset of its parameter block in [`Recorder::into_parts`]' bytes.
    pub params_at: u64,
    pub buffers: Vec<(u32, T::Buffer)>,
    pub groups: [u32; 3],
}

pub struct Recorder<'a, T: Target = Gpu> {
    pub gpu: &'a T,
    params: Vec<u8>,
    stride: u64,
    pending: Vec<Pending<T>>,
}

impl<'a, T: Target> Recorder<'a, T> {
    pub fn new(gpu: &'a T) -> Recorder<'a, T> {
        let stride = gpu
            .uniform_offset_alignment()
            .max(PARAMS_BYTES)
            .next_multiple_of(PARAMS_BYTES);
        Recorder {
            gpu,
            params: Vec::new(),
            stride,
            pending: Vec::new(),
        }
    }

    /// Workgroup counts for `n` workgroups, folded into x and y when x would exceed the
    /// per-dimension limit (kernels undo it with `linear_group`).
    pub fn grid(&self, n: usize, z: usize) -> Result<[u32; 3], WgpuError> {
        let max = self.gpu.max_workgroups_per_dimension() as usize;
        let x = n.clamp(1, max);
        let y = n.div_ceil(x).max(1);
        if y > max || z > max {
            return Err(WgpuError::Unsupported(format!(
                "a dispatch of {n} x {z} workgroups exceeds the adapter's {max} per dimension"
            )));
        }
        Ok([x as u32, y as u32, z.max(1) as u32])
    }

    /// Adds a dispatch of `key` with `params` (its kernel's parameter struct) at binding 0 and
    /// `buffers` at their bindings.
    pub fn dispatch<P: bytemuck::Pod>(
        &mut self,
        key: PipelineKey,
        params: P,
        buffers: Vec<(u32, T::Buffer)>,
        groups: [u32; 3],
    ) -> Result<(), WgpuError> {
        let kernel = if self.gpu.profiled() {
            kernel_name(&key)
        } else {
            String::new()
        };
        let pipeline = self.gpu.pipeline(key)?;
        let params_at = self.params.len() as u64;
        const { assert!(std::mem::size_of::<P>() <= PARAMS_BYTES as usize) };
        // The rest of the block (the WGSL struct's padding) and of the stride stay zero.
        self.params.extend_from_slice(bytemuck::bytes_of(&params));
        self.params.resize((params_at + self.stride) as usize, 0);
        self.pending.push(Pending {
            pipeline,
            kernel,
            params_at,
            buffers,
            groups,
        });
        Ok(())
    }

    /// The parameter blocks (one per dispatch, `stride` apart) and the dispatches.
    pub fn into_parts(self) -> (Vec<u8>, Vec<Pending<T>>) {
        (self.params, self.pending)
    }
}

impl Recorder<'_, Gpu> {
    /// Creates the parameter buffer and the bind groups.
    pub fn finish(self) -> Result<Vec<Dispatch>, WgpuError> {
        let gpu = self.gpu;
        let params = gpu.buffer(
            "dispatch parameters",
            self.params.len() as u64,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            false,
        )?;
        gpu.queue.write_buffer(&params, 0, &self.params);
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut out = Vec::with_capacity(self.pending.len());
        for p in self.pending {
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
