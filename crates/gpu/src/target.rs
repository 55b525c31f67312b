//! What the op recorders need from a GPU API, so that the WebGPU backend (wgpu) and the
//! Vulkan backend (ash, SPIR-V compiled from the same WGSL) share one dispatch builder per op
//! and one graph walk (`graph_walk::record_nodes`): each API says how it names a buffer and a
//! pipeline, compiles a kernel variant, and what its device is like. Errors are the layer's
//! [`GpuError`]s: a backend reports its device's failures in them, and maps them back into
//! its own error type.

use crate::error::GpuError;
use crate::pipelines::PipelineKey;

pub trait Target {
    /// A storage or uniform buffer (cheap to clone: a handle).
    type Buffer: Clone;
    /// A compiled compute pipeline (cheap to clone).
    type Pipeline: Clone;

    /// The pipeline of a kernel variant, compiled on first use.
    fn pipeline(&self, key: PipelineKey) -> Result<Self::Pipeline, GpuError>;
    /// A software device on the CPU (lavapipe, SwiftShader): kernels pick variants without
    /// workgroup barriers there.
    fn is_cpu(&self) -> bool;
    /// Kernels take their f16 variants.
    fn f16_kernels(&self) -> bool;
    /// Workgroups per dispatch dimension.
    fn max_workgroups_per_dimension(&self) -> u32;
    /// Alignment of a uniform binding's offset.
    fn uniform_offset_alignment(&self) -> u64;
    /// Bytes of the largest uniform binding.
    fn max_uniform_binding(&self) -> u64;
    /// Kernels are timed one by one (recordings then keep each dispatch's kernel name).
    fn profiled(&self) -> bool;
    /// Kernels with a `SUBGROUPS` variant take it (subgroup arithmetic in compute shaders).
    /// wgpu devices do not (this default): the WebGPU backend runs the portable kernels.
    fn subgroup_kernels(&self) -> bool {
        false
    }
    /// Quantized matmuls take the packed integer dot product kernel (`mul_mat_q8.wgsl`) for
    /// the types it reads. wgpu devices do not (this default).
    fn int_dot_kernels(&self) -> bool {
        false
    }
    /// The integer dot product kernel's multiply-adds are made exact through f64
    /// (`EXACT_FMA`: the device has f64 arithmetic), so it keeps the CPU's bits on drivers
    /// that split `fma` into a multiply and an add (lavapipe).
    fn exact_fma_kernels(&self) -> bool {
        false
    }
}
