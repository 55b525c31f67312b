//! Writing GGUF files: metadata and tensors, with alignment padding, as one file or as
//! llama.cpp-style split shards. Used to build synthetic models for tests.

use std::io::{self, Write};

use crate::parse::{
    align_up, tensor_size, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS,
};
use crate::split::{SPLIT_COUNT_KEY, SPLIT_NO_KEY, SPLIT_TENSORS_COUNT_KEY};
use crate::{GgmlType, GgufError, Value};

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    data: Vec<u8>,
}

/// Builds a GGUF file in memory. Every `add_*` validates what it is given, so the output is
/// always a file the reader accepts.
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

fn invalid(problem: String) -> GgufError {
    GgufError::InvalidWrite { problem }
}

impl GgufWriter {
    /// A version 3 file with the default alignment (32).
    pub fn new() -> GgufWriter {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// 2 or 3 (the layouts are the same; version 1 had 32-bit counts and is not written).
    pub fn set_version(&mut self, version: u32) -> Result<&mut Self, GgufError> {
        if version != 2 && version != 3 {
            return Err(invalid(format!(
                "version {version} (only 2 and 3 are written)"
            )));
        }
        self.version = version;
        Ok(self)
    }

    /// Sets the alignment and records it as `general.alignment` (u32).
    pub fn set_alignment(&mut self, alignment: u64) -> Result<&mut Self, GgufError> {
        let a = u32::try_from(alignment)
            .ok()
            .filter(|a| a.is_power_of_two())
            .ok_or_else(|| {
                invalid(format!(
                    "alignment {alignment} (needs a power of two < 2^32)"
                ))
            })?;
        self.alignment = alignment;
        match self.metadata.iter_mut().find(|(k, _)| k == ALIGNMENT_KEY) {
            Some((_, v)) => *v = Value::U32(a),
            None => self.metadata.push((ALIGNMENT_KEY.into(), Value::U32(a))),
        }
        Ok(self)
    }

    /// Adds one metadata entry. Keys must be unique; array elements must all have the array's
    /// declared type.
    pub fn add(&mut self, key: impl Into<String>, value: Value) -> Result<&mut Self, GgufError> {
        let key = key.into();
        if self.metadata.iter().any(|(k, _)| *k == key) {
            return Err(invalid(format!("metadata key `{key}` twice")));
        }
        check_value(&key, &value, 0)?;
        if key == ALIGNMENT_KEY {
            let a = value.as_u64().unwrap_or(0);
            return self.set_alignment(a);
        }
        self.metadata.push((key, value));
        Ok(self)
    }

    pub fn add_str(
        &mut self,
        key: impl Into<String>,
        v: impl Into<String>,
    ) -> Result<&mut Self, GgufError> {
        self.add(key, Value::String(v.into()))
    }

    pub fn add_u32(&mut self, key: impl Into<String>, v: u32) -> Result<&mut Self, GgufError> {
        self.add(key, Value::U32(v))
    }

    pub fn add_f32(&mut self, key: impl Into<String>, v: f32) -> Result<&mut Self, GgufError> {
        self.add(key, Value::F32(v))
    }

    pub fn add_bool(&mut self, key: impl Into<String>, v: bool) -> Result<&mut Self, GgufError> {
        self.add(key, Value::Bool(v))
    }

    /// An array of strings (e.g. `tokenizer.ggml.tokens`).
    pub fn add_str_array<S: Into<String>>(
        &mut self,
        key: impl Into<String>,
        items: impl IntoIterator<Item = S>,
    ) -> Result<&mut Self, GgufError> {
        let items = items.into_iter().map(|s| Value::String(s.into())).collect();
        self.add(key, Value::Array(crate::ValueType::String, items))
    }

    /// Adds a tensor. `dims` are in ggml order (`dims[0]` = row length); `data` must be exactly
    /// the tensor's size for `ty`.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<&mut Self, GgufError> {
        let name = name.into();
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(invalid(format!("tensor `{name}` twice")));
        }
        if dims.len() > MAX_DIMS as usize {
            return Err(invalid(format!("tensor `{name}` with {} dims", dims.len())));
        }
        let size = tensor_size(&name, dims, ty)?;
        if data.len() as u64 != size {
            return Err(invalid(format!(
                "tensor `{name}` ({ty} {dims:?}) with {} bytes of data, expected {size}",
                data.len()
            )));
        }
        self.tensors.push(PendingTensor {
            name,
            dims: dims.to_vec(),
            ty,
            data,
        });
        Ok(self)
    }

    /// The whole file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let all: Vec<&PendingTensor> = self.tensors.iter().collect();
        self.write_file(&mut out, &self.metadata, &all)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// Writes the whole file to `w`.
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let all: Vec<&PendingTensor> = self.tensors.iter().collect();
        self.write_file(w, &self.metadata, &all)
    }

    /// The model as `n_shards` split files (llama.cpp's gguf-split layout): tensors are dealt
    /// out in order, as evenly as counts allow; shard 0 carries the metadata; every shard
    /// carries `split.no` (0-based), `split.count` and `split.tensors.count`.
    pub fn to_split(&self, n_shards: usize) -> Result<Vec<Vec<u8>>, GgufError> {
        if n_shards == 0 || n_shards > u16::MAX as usize {
            return Err(invalid(format!("{n_shards} shards")));
        }
        let n_tensors = i32::try_from(self.tensors.len())
            .map_err(|_| invalid("too many tensors for split.tensors.count".into()))?;
        let per_shard = self.tensors.len().div_ceil(n_shards).max(1);
        let mut shards = Vec::with_capacity(n_shards);
        for no in 0..n_shards {
            let base: Vec<(String, Value)> = if no == 0 {
                self.metadata.clone()
            } else {
                self.metadata
                    .iter()
                    .filter(|(k, _)| k == ALIGNMENT_KEY)
                    .cloned()
                    .collect()
            };
            let mut metadata: Vec<(String, Value)> = base
                .into_iter()
                .filter(|(k, _)| !k.starts_with("split."))
                .collect();
            metadata.push((SPLIT_NO_KEY.into(), Value::U16(no as u16)));
            metadata.push((SPLIT_COUNT_KEY.into(), Value::U16(n_shards as u16)));
            metadata.push((SPLIT_TENSORS_COUNT_KEY.into(), Value::I32(n_tensors)));
            let tensors: Vec<&PendingTensor> = self
                .tensors
                .iter()
                .skip(no * per_shard)
                .take(per_shard)
                .collect();
            let mut out = Vec::new();
            self.write_file(&mut out, &metadata, &tensors)
                .expect("writing to a Vec cannot fail");
            shards.push(out);
        }
        Ok(shards)
    }

    fn write_file(
        &self,
        w: &mut impl Write,
        metadata: &[(String, Value)],
        tensors: &[&PendingTensor],
    ) -> io::Result<()> {
        let mut head = Vec::new();
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&self.version.to_le_bytes());
        head.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
        head.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
        for (key, value) in metadata {
            put_string(&mut head, key);
            head.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            put_value(&mut head, value);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(tensors.len());
        for t in tensors {
            put_string(&mut head, &t.name);
            head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&t.ty.id().to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = align_up(offset + t.data.len() as u64, self.alignment).expect("in memory");
        }
        let data_offset = align_up(head.len() as u64, self.alignment).expect("in memory");
        head.resize(data_offset as usize, 0);
        w.write_all(&head)?;
        let mut written = 0u64;
        for (t, &at) in tensors.iter().zip(&offsets) {
            write_zeros(w, at - written)?;
            w.write_all(&t.data)?;
            written = at + t.data.len() as u64;
        }
        // Pad the last tensor too, as ggml does, so concatenated reads stay aligned.
        write_zeros(w, offset - written)
    }
}

fn write_zeros(w: &mut impl Write, n: u64) -> io::Result<()> {
    const ZEROS: [u8; 64] = [0; 64];
    let mut left = n;
    while left > 0 {
        let k = left.min(ZEROS.len() as u64) as usize;
        w.write_all(&ZEROS[..k])?;
        left -= k as u64;
    }
    Ok(())
}

fn check_value(key: &str, value: &Value, depth: u32) -> Result<(), GgufError> {
    if let Value::Array(elem_ty, items) = value {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(invalid(format!(
                "`{key}`: arrays nested deeper than {MAX_ARRAY_DEPTH}"
            )));
        }
        for item in items {
            if item.value_type() != *elem_ty {
                return Err(invalid(format!(
                    "`{key}`: a {:?} inside an array of {elem_ty:?}",
                    item.value_type()
                )));
            }
            check_value(key, item, depth + 1)?;
        }
    }
    Ok(())
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.push(*v as u8),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(*v as u8),
        Value::String(s) => put_string(out, s),
        Value::Array(elem_ty, items) => {
            out.extend_from_slice(&(*elem_ty as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}
