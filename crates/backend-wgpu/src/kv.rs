//! The KV cache in wgpu buffers (its layout: `tessera_gpu::kv`).

use tessera_core::backend::KvLayout;
use tessera_gpu::kv::GpuKv;

use crate::device::Gpu;
use crate::error::WgpuError;

/// The cache for `layout`, each layer's K and V in its own storage buffer.
pub fn allocate(gpu: &Gpu, layout: &KvLayout) -> Result<GpuKv<wgpu::Buffer>, WgpuError> {
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    GpuKv::with_buffers(layout, |name, bytes| gpu.buffer(name, bytes, usage, false))
}
