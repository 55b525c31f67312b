//! The parsed header of a GGUF file: metadata and tensor descriptions.

use crate::{GgmlType, Value};

/// Where one tensor lives and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the row length (the fastest-varying dimension).
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Byte offset relative to the start of the data section (of its own shard, for split
    /// models).
    pub offset: u64,
    /// Bytes of tensor data, computed from `dims` and `ty`.
    pub size: u64,
}

impl TensorInfo {
    /// Number of elements (1 for a tensor with no dimensions). The reader has checked that this
    /// does not overflow.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A parsed GGUF header.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub version: u32,
    /// Metadata in file order; keys are unique.
    pub metadata: Vec<(String, Value)>,
    /// Tensor descriptions in file order; names are unique.
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`, or 32 when absent.
    pub alignment: u64,
    /// Absolute file offset of the data section (the end of the header, padded to `alignment`).
    pub data_offset: u64,
}

impl Header {
    /// Fails unless every tensor's bytes lie inside a file of `file_len` bytes (what a stream's
    /// announced length allows to check before its data arrives).
    pub fn check_tensors_within(&self, file_len: u64) -> Result<(), crate::GgufError> {
        crate::file::check_bounds(self, file_len)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// Any non-negative integer value as u64.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    /// Any numeric value as f32.
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key)?.as_f32()
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    pub fn get_array(&self, key: &str) -> Option<&[Value]> {
        self.get(key)?.as_array()
    }

    /// `general.architecture`, e.g. "llama" or "gemma3".
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Bytes the data section must hold: the end of the furthest tensor.
    pub fn data_len(&self) -> u64 {
        // Sums cannot overflow: the parser checked `data_offset + offset + size` fits in u64.
        self.tensors
            .iter()
            .map(|t| t.offset + t.size)
            .max()
            .unwrap_or(0)
    }
}
