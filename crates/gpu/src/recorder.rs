//! Records a graph's dispatches once per graph shape: each dispatch gets its pipeline and its
//! 64-byte parameter block (all blocks live in one buffer at aligned offsets); each backend
//! then binds them (wgpu bind groups, Vulkan descriptor sets). Replaying a recording only
//! re-encodes it; nothing is created per step.

use crate::error::GpuError;
use crate::pipelines::{kernel_name, PipelineKey};
use crate::target::Target;

/// Bytes of one dispatch's parameter block (`struct Params` in every kernel, padded to this
/// size; build.rs checks it). Each op's parameters are a `#[repr(C)]` bytemuck struct whose
/// fields mirror, in order, the WGSL struct's fields before the padding, with a const
/// assertion of its size against the generated `shaders::wgsl_params` constant of its file.
pub const PARAMS_BYTES: u64 = 64;

/// A dispatch recorded but not yet bound: each API turns these into its own bind groups or
/// descriptor sets ([`Recorder::into_parts`]).
pub struct Pending<T: Target> {
    pub pipeline: T::Pipeline,
    /// The kernel variant's name, for a profile (`pipelines::kernel_name`); empty when the
    /// device is not profiled.
    pub kernel: String,
    /// Offset of its parameter block in [`Recorder::into_parts`]' bytes.
    pub params_at: u64,
    pub buffers: Vec<(u32, T::Buffer)>,
    pub groups: [u32; 3],
}

pub struct Recorder<'a, T: Target> {
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
    pub fn grid(&self, n: usize, z: usize) -> Result<[u32; 3], GpuError> {
        let max = self.gpu.max_workgroups_per_dimension() as usize;
        let x = n.clamp(1, max);
        let y = n.div_ceil(x).max(1);
        if y > max || z > max {
            return Err(GpuError::Unsupported(format!(
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
    ) -> Result<(), GpuError> {
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
