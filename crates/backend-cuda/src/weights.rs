//! Weights on the device: each tensor's GGUF bytes copied as they are (quantized weights stay
//! quantized; the kernels read ggml's blocks), one allocation per tensor.

use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::GgmlType;

use crate::device::{DevBuf, Gpu};
use crate::error::CudaError;

/// The kernels' name suffix for a weight type (`matvec_q4_k`), for the types the kernels read
/// (`shaders/cuda/dequant.cuh`, the WGSL backend's set); None for the others.
pub fn type_suffix(ty: GgmlType) -> Option<&'static str> {
    Some(match ty {
        GgmlType::F32 => "f32",
        GgmlType::F16 => "f16",
        GgmlType::Q4_0 => "q4_0",
        GgmlType::Q4_1 => "q4_1",
        GgmlType::Q5_0 => "q5_0",
        GgmlType::Q5_1 => "q5_1",
        GgmlType::Q8_0 => "q8_0",
        GgmlType::Q4_K => "q4_k",
        GgmlType::Q5_K => "q5_k",
        GgmlType::Q6_K => "q6_k",
        GgmlType::MXFP4 => "mxfp4",
        _ => return None,
    })
}

/// How a matmul's activations are prepared for a weight type, as ggml's CPU backend does for
/// its vec_dot (`Act<T>` in dequant.cuh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    F32,
    /// Rounded to f16 (F16 weights).
    F16,
    /// q8_0 / q8_1 blocks of 32.
    Q8_0,
    /// q8_K blocks of 256.
    Q8K,
}

pub fn act_kind(ty: GgmlType) -> ActKind {
    match ty {
        GgmlType::F32 => ActKind::F32,
        GgmlType::F16 => ActKind::F16,
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => ActKind::Q8K,
        _ => ActKind::Q8_0,
    }
}

/// A 2-D weight (rows of `k` elements) on the device.
pub struct CudaWeight {
    pub name: String,
    pub ty: GgmlType,
    pub k: usize,
    pub n_rows: usize,
    pub row_bytes: usize,
    pub buf: DevBuf,
}

impl CudaWeight {
    pub fn suffix(&self) -> Result<&'static str, CudaError> {
        type_suffix(self.ty).ok_or_else(|| CudaError::UnsupportedType {
            name: self.name.clone(),
            ty: self.ty,
        })
    }

    /// The address of an f32 vector (a norm weight, a bias, rope factors, sinks): the only
    /// type the ops that take one read.
    pub fn f32_vector(&self) -> Result<u64, CudaError> {
        if self.ty != GgmlType::F32 {
            return Err(CudaError::UnsupportedType {
                name: self.name.clone(),
                ty: self.ty,
            });
        }
        Ok(self.buf.ptr)
    }
}

/// Every weight of a model, indexed like its [`WeightStore`].
pub struct CudaWeights {
    /// Identifies the store the weights came from (its address and size).
    pub source: (usize, usize),
    pub weights: Vec<CudaWeight>,
    pub bytes: usize,
}

impl CudaWeights {
    pub fn upload(gpu: &Gpu, store: &WeightStore) -> Result<CudaWeights, CudaError> {
        if !store.has_bytes() {
            return Err(CudaError::Unsupported(
                "a model whose weights are not in memory (streamed into another device)".into(),
            ));
        }
        let mut weights = Vec::with_capacity(store.len());
        for i in 0..store.len() {
            let id = WeightId(i as u32);
            let d = store.desc(id);
            let name = store.get(id).name.clone();
            if type_suffix(d.ty).is_none() {
                return Err(CudaError::UnsupportedType { name, ty: d.ty });
            }
            let bytes = store.bytes(id);
            weights.push(CudaWeight {
                name,
                ty: d.ty,
                k: d.ne[0],
                n_rows: d.n_rows(),
                row_bytes: bytes.len() / d.n_rows().max(1),
                buf: gpu.upload(bytes)?,
            });
        }
        Ok(CudaWeights {
            source: source_of(store),
            weights,
            bytes: store.total_bytes(),
        })
    }

    pub fn get(&self, id: WeightId) -> &CudaWeight {
        &self.weights[id.0 as usize]
    }
}

/// What identifies a weight store (to notice a backend being handed another model).
pub fn source_of(store: &WeightStore) -> (usize, usize) {
    (store as *const WeightStore as usize, store.len())
}
