//! Weights in wgpu buffers: each tensor's bytes go from the GGUF source (mmap natively)
//! straight into buffers mapped at creation, one tensor at a time, so the model never exists
//! twice in host memory. The split of large tensors across bindings: `tessera_gpu::weights`.

use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::GgmlType;
use tessera_gpu::weights::{source_of, GpuWeight, GpuWeights};

use crate::device::Gpu;
use crate::error::WgpuError;

/// Uploads `bytes` (`n_rows` rows of `row_bytes`), split so each part fits one binding.
pub fn upload(
    gpu: &Gpu,
    name: &str,
    ty: GgmlType,
    k: usize,
    n_rows: usize,
    bytes: &[u8],
) -> Result<GpuWeight<wgpu::Buffer>, WgpuError> {
    let row_bytes = bytes.len() / n_rows.max(1);
    let weight = allocate(gpu, name, ty, k, n_rows, row_bytes, true)?;
    for part in &weight.parts {
        let src = &bytes[part.row0 * row_bytes..(part.row0 + part.rows) * row_bytes];
        {
            let mut view = part
                .buffer
                .get_mapped_range_mut(..)
                .map_err(|e| WgpuError::Validation(format!("{name}: {e}")))?;
            view.slice(..src.len()).copy_from_slice(src);
        }
        part.buffer.unmap();
    }
    Ok(weight)
}

/// The buffers for `n_rows` rows of `row_bytes`, split by rows so each part fits one
/// binding; `mapped`: mapped at creation, for the caller to fill and unmap (else filled by
/// `write_buffer`, which needs `COPY_DST`).
pub fn allocate(
    gpu: &Gpu,
    name: &str,
    ty: GgmlType,
    k: usize,
    n_rows: usize,
    row_bytes: usize,
    mapped: bool,
) -> Result<GpuWeight<wgpu::Buffer>, WgpuError> {
    let max_rows = rows_per_part(gpu, name, ty, row_bytes)?;
    GpuWeight::split(ty, k, n_rows, row_bytes, max_rows, |bytes| {
        part_buffer(gpu, name, bytes, mapped)
    })
}

/// Rows each part (binding) of a weight of type `ty` with rows of `row_bytes` holds.
pub fn rows_per_part(
    gpu: &Gpu,
    name: &str,
    ty: GgmlType,
    row_bytes: usize,
) -> Result<usize, WgpuError> {
    Ok(GpuWeight::<wgpu::Buffer>::rows_per_binding(
        gpu.max_weight_binding(),
        name,
        ty,
        row_bytes,
    )?)
}

/// One part's buffer of `bytes`.
pub fn part_buffer(
    gpu: &Gpu,
    name: &str,
    bytes: u64,
    mapped: bool,
) -> Result<wgpu::Buffer, WgpuError> {
    // COPY_SRC: tests read weights back.
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
    gpu.buffer(name, bytes, usage, mapped)
}

/// Uploads every weight of `store`.
pub fn upload_all(gpu: &Gpu, store: &WeightStore) -> Result<GpuWeights<wgpu::Buffer>, WgpuError> {
    if !store.has_bytes() {
        // A model streamed into a device: its weights come from that stream, not from here.
        return Err(WgpuError::Validation(
            "the model's weights are not in memory (streamed into another device?)".into(),
        ));
    }
    let mut weights = Vec::with_capacity(store.len());
    for i in 0..store.len() {
        let id = WeightId(i as u32);
        let d = store.desc(id);
        weights.push(upload(
            gpu,
            &store.get(id).name,
            d.ty,
            d.ne[0],
            d.n_rows(),
            store.bytes(id),
        )?);
    }
    gpu.check()?;
    Ok(GpuWeights {
        source: source_of(store),
        weights,
        bytes: store.total_bytes(),
    })
}
