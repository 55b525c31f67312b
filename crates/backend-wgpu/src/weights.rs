//! Weights on the GPU: each tensor's bytes go from the GGUF source (mmap natively) straight
//! into buffers mapped at creation, one tensor at a time, so the model never exists twice in
//! host memory. A tensor larger than the adapter's largest storage binding is split by rows
//! into several buffers (bindings), each holding whole rows.

use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::GgmlType;

use crate::device::Gpu;
use crate::error::WgpuError;
use crate::shaders::Define;
use crate::target::Target;

/// The types the kernels read (`dequant.inc.wgsl`).
pub fn is_gpu_type(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
            | GgmlType::MXFP4
    )
}

/// The define that selects a type's dequantizer.
pub fn type_define(ty: GgmlType) -> Option<&'static str> {
    Some(match ty {
        GgmlType::F32 => "W_F32",
        GgmlType::F16 => "W_F16",
        GgmlType::Q4_0 => "W_Q4_0",
        GgmlType::Q4_1 => "W_Q4_1",
        GgmlType::Q5_0 => "W_Q5_0",
        GgmlType::Q5_1 => "W_Q5_1",
        GgmlType::Q8_0 => "W_Q8_0",
        GgmlType::Q4_K => "W_Q4_K",
        GgmlType::Q5_K => "W_Q5_K",
        GgmlType::Q6_K => "W_Q6_K",
        GgmlType::MXFP4 => "W_MXFP4",
        _ => return None,
    })
}

/// `W_ALIGNED` for `dequant.inc.wgsl` where every row and block of `w` is a whole number of
/// 32-bit words (Q4_1, Q5_1, Q4_K, Q5_K, F32), so no read needs the unaligned path. CPU
/// adapters only, where it was measured (lavapipe; Chromium's SwiftShader is one too, wgpu
/// reports fallback adapters as `DeviceType::Cpu`): GPUs keep the branching reads until a
/// real GPU measures it.
pub fn alignment_define<T: Target>(gpu: &T, w: &GpuWeight<T::Buffer>) -> Option<Define> {
    (gpu.is_cpu() && w.row_bytes % 4 == 0 && w.ty.type_size() % 4 == 0).then_some(("W_ALIGNED", 1))
}

/// Rows `row0 .. row0 + rows` of a weight in one buffer.
pub struct WeightPart<B = wgpu::Buffer> {
    pub buffer: B,
    pub row0: usize,
    pub rows: usize,
}

/// A 2-D weight (rows of `k` elements) on the GPU (`B`: the API's buffer).
pub struct GpuWeight<B = wgpu::Buffer> {
    pub ty: GgmlType,
    pub k: usize,
    pub n_rows: usize,
    pub row_bytes: usize,
    pub parts: Vec<WeightPart<B>>,
}

impl<B> GpuWeight<B> {
    /// The buffer of an f32 vector (a norm weight, a bias, rope factors): the only type the
    /// ops that take one read.
    pub fn f32_vector(&self, what: &str) -> Result<&B, WgpuError> {
        if self.ty != GgmlType::F32 || self.parts.len() != 1 {
            return Err(WgpuError::UnsupportedType {
                name: what.into(),
                ty: self.ty,
            });
        }
        Ok(&self.parts[0].buffer)
    }

    /// Rows each part (binding) of a weight of type `ty` with rows of `row_bytes` holds,
    /// where a binding takes at most `limit` bytes.
    pub fn rows_per_binding(
        limit: u64,
        name: &str,
        ty: GgmlType,
        row_bytes: usize,
    ) -> Result<usize, WgpuError> {
        if !is_gpu_type(ty) {
            return Err(WgpuError::UnsupportedType {
                name: name.to_string(),
                ty,
            });
        }
        if row_bytes as u64 > limit {
            return Err(WgpuError::BindingTooLarge {
                what: format!("one row of {name}"),
                bytes: row_bytes as u64,
                limit,
            });
        }
        Ok((limit / row_bytes.max(1) as u64).max(1) as usize)
    }

    /// The parts of `n_rows` rows of `row_bytes`, `max_rows` per part, each buffer made by
    /// `buffer(name, bytes)`.
    pub fn split<E>(
        ty: GgmlType,
        k: usize,
        n_rows: usize,
        row_bytes: usize,
        max_rows: usize,
        mut buffer: impl FnMut(u64) -> Result<B, E>,
    ) -> Result<GpuWeight<B>, E> {
        let mut parts = Vec::new();
        let mut row0 = 0;
        while row0 < n_rows {
            let rows = max_rows.min(n_rows - row0);
            parts.push(WeightPart {
                buffer: buffer((rows * row_bytes) as u64)?,
                row0,
                rows,
            });
            row0 += rows;
        }
        Ok(GpuWeight {
            ty,
            k,
            n_rows,
            row_bytes,
            parts,
        })
    }
}

impl GpuWeight {
    /// Uploads `bytes` (`n_rows` rows of `row_bytes`), split so each part fits one binding.
    pub fn upload(
        gpu: &Gpu,
        name: &str,
        ty: GgmlType,
        k: usize,
        n_rows: usize,
        bytes: &[u8],
    ) -> Result<GpuWeight, WgpuError> {
        let row_bytes = bytes.len() / n_rows.max(1);
        let weight = GpuWeight::allocate(gpu, name, ty, k, n_rows, row_bytes, true)?;
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
    /// binding; `mapped`: mapped at creation, for the caller to fill and unmap (else filled
    /// by `write_buffer`, which needs `COPY_DST`).
    pub fn allocate(
        gpu: &Gpu,
        name: &str,
        ty: GgmlType,
        k: usize,
        n_rows: usize,
        row_bytes: usize,
        mapped: bool,
    ) -> Result<GpuWeight, WgpuError> {
        let max_rows = GpuWeight::rows_per_part(gpu, name, ty, row_bytes)?;
        GpuWeight::split(ty, k, n_rows, row_bytes, max_rows, |bytes| {
            GpuWeight::part_buffer(gpu, name, bytes, mapped)
        })
    }

    /// Rows each part (binding) of a weight of type `ty` with rows of `row_bytes` holds.
    pub fn rows_per_part(
        gpu: &Gpu,
        name: &str,
        ty: GgmlType,
        row_bytes: usize,
    ) -> Result<usize, WgpuError> {
        GpuWeight::<wgpu::Buffer>::rows_per_binding(gpu.max_weight_binding(), name, ty, row_bytes)
    }

    /// One part's buffer of `bytes`.
    pub fn part_buffer(
        gpu: &Gpu,
        name: &str,
        bytes: u64,
        mapped: bool,
    ) -> Result<wgpu::Buffer, WgpuError> {
        // COPY_SRC: tests read weights back.
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        gpu.buffer(name, bytes, usage, mapped)
    }
}

/// Every weight of a model, indexed like its [`WeightStore`].
pub struct GpuWeights<B = wgpu::Buffer> {
    /// Identifies the store the weights came from (its address and size).
    pub source: (usize, usize),
    pub weights: Vec<GpuWeight<B>>,
    pub bytes: usize,
}

impl<B> GpuWeights<B> {
    pub fn get(&self, id: WeightId) -> &GpuWeight<B> {
        &self.weights[id.0 as usize]
    }
}

impl GpuWeights {
    pub fn upload(gpu: &Gpu, store: &WeightStore) -> Result<GpuWeights, WgpuError> {
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
            weights.push(GpuWeight::upload(
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
}

/// What identifies a weight store (to notice a backend being handed another model).
pub fn source_of(store: &WeightStore) -> (usize, usize) {
    (store as *const WeightStore as usize, store.len())
}
