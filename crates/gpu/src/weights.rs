//! Weights on the GPU: each tensor's bytes go from the GGUF source (mmap natively) straight
//! into buffers (the backend's), one tensor at a time, so the model never exists twice in
//! host memory. A tensor larger than the adapter's largest storage binding is split by rows
//! into several buffers (bindings), each holding whole rows.

use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::GgmlType;

use tessera_kernels::Define;

use crate::error::GpuError;
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
pub struct WeightPart<B> {
    pub buffer: B,
    pub row0: usize,
    pub rows: usize,
}

/// A 2-D weight (rows of `k` elements) on the GPU (`B`: the API's buffer).
pub struct GpuWeight<B> {
    pub ty: GgmlType,
    pub k: usize,
    pub n_rows: usize,
    pub row_bytes: usize,
    pub parts: Vec<WeightPart<B>>,
}

impl<B> GpuWeight<B> {
    /// The buffer of an f32 vector (a norm weight, a bias, rope factors): the only type the
    /// ops that take one read.
    pub fn f32_vector(&self, what: &str) -> Result<&B, GpuError> {
        if self.ty != GgmlType::F32 || self.parts.len() != 1 {
            return Err(GpuError::UnsupportedType {
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
    ) -> Result<usize, GpuError> {
        if !is_gpu_type(ty) {
            return Err(GpuError::UnsupportedType {
                name: name.to_string(),
                ty,
            });
        }
        if row_bytes as u64 > limit {
            return Err(GpuError::BindingTooLarge {
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

/// Every weight of a model, indexed like its [`WeightStore`].
pub struct GpuWeights<B> {
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

/// What identifies a weight store (to notice a backend being handed another model).
pub fn source_of(store: &WeightStore) -> (usize, usize) {
    (store as *const WeightStore as usize, store.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weight_type_lists_match_the_block_sizes() {
        use tessera_gguf::GgmlType;
        use tessera_kernels::variants::{ALIGNED_TYPES, WEIGHT_TYPES};
        let mut types = Vec::new();
        let mut aligned = Vec::new();
        for id in 0..64 {
            let Some(ty) = GgmlType::from_id(id) else {
                continue;
            };
            if let Some(d) = type_define(ty) {
                types.push(d);
                if ty.type_size() % 4 == 0 {
                    aligned.push(d);
                }
            }
        }
        types.sort();
        aligned.sort();
        let mut listed = WEIGHT_TYPES.to_vec();
        listed.sort();
        let mut listed_aligned = ALIGNED_TYPES.to_vec();
        listed_aligned.sort();
        assert_eq!(types, listed);
        assert_eq!(aligned, listed_aligned);
    }
}
