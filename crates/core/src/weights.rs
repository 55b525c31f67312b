//! The model's weights: descriptors of tensors whose bytes stay in the GGUF file (mmap'd or in
//! memory), never copied; or, for a model streamed into GPU buffers, only their descriptors.

use std::sync::Arc;

use tessera_gguf::{GgmlType, GgufFile};

use crate::error::EngineError;
use crate::tensor::{Ne, TensorDesc};

/// Index of a weight in a [`WeightStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WeightId(pub u32);

/// One weight tensor: its name, shape and type, and where its bytes are in the file.
#[derive(Clone, Debug)]
pub struct Weight {
    pub name: String,
    pub desc: TensorDesc,
    /// Index into the file's `header().tensors`.
    file_index: usize,
}

/// The weights a model uses, each checked at load (shape, type, bytes present).
pub struct WeightStore {
    file: Arc<GgufFile>,
    weights: Vec<Weight>,
}

/// The types the CPU backend can compute with (matmul or row lookup).
pub fn is_compute_type(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q2_K
            | GgmlType::Q3_K
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
            | GgmlType::MXFP4
    )
}

impl WeightStore {
    pub fn new(file: Arc<GgufFile>) -> WeightStore {
        WeightStore {
            file,
            weights: Vec::new(),
        }
    }

    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    /// Registers the tensor `name`, which must have exactly the shape `ne` (trailing 1s may be
    /// omitted in the file) and a type the engine computes with.
    pub fn require(&mut self, name: &str, ne: &[usize]) -> Result<WeightId, EngineError> {
        self.find(name, ne)?
            .ok_or_else(|| EngineError::MissingTensor(name.to_string()))
    }

    /// Like [`WeightStore::require`] but `Ok(None)` when the file has no such tensor.
    pub fn optional(&mut self, name: &str, ne: &[usize]) -> Result<Option<WeightId>, EngineError> {
        self.find(name, ne)
    }

    fn find(&mut self, name: &str, ne: &[usize]) -> Result<Option<WeightId>, EngineError> {
        if let Some(i) = self.weights.iter().position(|w| w.name == name) {
            return Ok(Some(WeightId(i as u32)));
        }
        let Some(file_index) = self.file.tensor_index(name) else {
            return Ok(None);
        };
        let info = &self.file.header().tensors[file_index];
        let mut got: Vec<u64> = info.dims.clone();
        while got.len() > 1 && got.last() == Some(&1) {
            got.pop();
        }
        let mut expected: Vec<u64> = ne.iter().map(|&d| d as u64).collect();
        while expected.len() > 1 && expected.last() == Some(&1) {
            expected.pop();
        }
        if got != expected {
            return Err(EngineError::BadShape {
                name: name.to_string(),
                got: info.dims.clone(),
                expected,
            });
        }
        if !is_compute_type(info.ty) {
            return Err(EngineError::UnsupportedType {
                name: name.to_string(),
                ty: info.ty,
            });
        }
        let mut full: Ne = [1; 4];
        for (d, &n) in full.iter_mut().zip(ne) {
            *d = n;
        }
        let desc = TensorDesc::contiguous(info.ty, full);
        // A header-only file's bytes went to a device as they arrived; there its size is
        // what the stream checked arrived.
        let data_len = match self.file.has_tensor_data() {
            true => self.file.tensor_data_at(file_index).map(|d| d.len() as u64),
            false => Some(info.size),
        };
        if !full[0].is_multiple_of(info.ty.block_size() as usize)
            || data_len != Some(desc.n_bytes() as u64)
        {
            return Err(EngineError::MissingTensorData {
                name: name.to_string(),
            });
        }
        self.weights.push(Weight {
            name: name.to_string(),
            desc,
            file_index,
        });
        Ok(Some(WeightId(self.weights.len() as u32 - 1)))
    }

    pub fn get(&self, id: WeightId) -> &Weight {
        &self.weights[id.0 as usize]
    }

    pub fn desc(&self, id: WeightId) -> &TensorDesc {
        &self.weights[id.0 as usize].desc
    }

    /// Whether the weights' bytes are in host memory (false when the model was streamed
    /// straight into a device: [`GgufFile::from_headers`]).
    pub fn has_bytes(&self) -> bool {
        self.file.has_tensor_data()
    }

    /// The weight's bytes, straight from the file (empty when not [`WeightStore::has_bytes`]).
    /// Tells the OS the file pages of weight `id` are not needed now (a backend keeps its own
    /// copy in another layout); see [`tessera_gguf::GgufFile::release_tensor_pages`].
    pub fn release_file_pages(&self, id: WeightId) {
        self.file
            .release_tensor_pages(self.weights[id.0 as usize].file_index);
    }

    pub fn bytes(&self, id: WeightId) -> &[u8] {
        let w = &self.weights[id.0 as usize];
        // Checked present and of the right length when the weight was registered.
        self.file.tensor_data_at(w.file_index).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.weights.len()
    }

    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// Total bytes of the registered weights.
    pub fn total_bytes(&self) -> usize {
        self.weights.iter().map(|w| w.desc.n_bytes()).sum()
    }
}
