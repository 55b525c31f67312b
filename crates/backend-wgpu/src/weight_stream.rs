//! A GGUF stream's tensors written into GPU buffers as their bytes arrive (the browser's
//! download, piece by piece), so the model's bytes never gather in host memory: at any moment
//! only one staging buffer of at most [`STAGING_BYTES`] is held.
//!
//! Each shard's header describes its tensors; their buffers are laid out like
//! [`GpuWeight::upload`]'s (rows split across bindings the adapter can take). When the stream's
//! length is known (and the header checked against it) every buffer is made at once, so a
//! model the GPU cannot hold fails before its download; otherwise each buffer is made when its
//! first byte arrives, so GPU memory never runs ahead of the bytes received.

use std::collections::HashMap;

use engine::weights::{WeightId, WeightStore};
use gguf::{Header, TensorInfo};

use crate::device::Gpu;
use crate::error::WgpuError;
use crate::weights::{source_of, GpuWeight, GpuWeights};

/// Bytes gathered before one `write_buffer`.
const STAGING_BYTES: usize = 1 << 20;
/// Bytes written between submissions (natively, written data waits in wgpu's staging memory
/// until the next submission).
const SUBMIT_BYTES: u64 = 64 << 20;

/// One tensor of the stream.
struct StreamedTensor {
    info: TensorInfo,
    /// Made up front (known length) or on the tensor's first piece.
    weight: Option<GpuWeight>,
    /// Bytes written so far.
    written: u64,
}

/// Bytes of the current part waiting to be written; `at` is where they go in the part's buffer
/// (a multiple of 4, as `write_buffer` wants).
#[derive(Default)]
struct Staging {
    tensor: usize,
    part: usize,
    at: u64,
    bytes: Vec<u8>,
}

/// Receives the tensors of one GGUF model (each shard in turn) into GPU buffers.
pub struct WeightStream {
    gpu: Gpu,
    tensors: Vec<StreamedTensor>,
    /// `tensors` index of each tensor of the current shard, by its index in the shard's header.
    shard_tensors: Vec<usize>,
    staging: Staging,
    unsubmitted: u64,
}

impl WeightStream {
    pub fn new(gpu: Gpu) -> WeightStream {
        WeightStream {
            gpu,
            tensors: Vec::new(),
            shard_tensors: Vec::new(),
            staging: Staging::default(),
            unsubmitted: 0,
        }
    }

    /// The next shard's header (as its stream reported it). `allocate_now`: make every buffer
    /// now, which the caller may do only once the header was checked against the stream's
    /// announced length ([`Header::check_tensors_within`]); else each tensor's buffers are
    /// made when its first byte arrives.
    pub fn begin_shard(&mut self, header: &Header, allocate_now: bool) -> Result<(), WgpuError> {
        self.flush()?;
        self.shard_tensors.clear();
        for info in &header.tensors {
            if !crate::weights::is_gpu_type(info.ty) {
                return Err(WgpuError::UnsupportedType {
                    name: info.name.clone(),
                    ty: info.ty,
                });
            }
            let weight = match allocate_now {
                true => Some(allocate(&self.gpu, info)?),
                false => None,
            };
            self.shard_tensors.push(self.tensors.len());
            self.tensors.push(StreamedTensor {
                info: info.clone(),
                weight,
                written: 0,
            });
        }
        self.gpu.check()
    }

    /// Bytes of the current shard's tensor `index` (its index in the shard's header) starting
    /// at `offset` in the tensor: they must continue where its last piece ended.
    pub fn write(&mut self, index: usize, offset: u64, mut bytes: &[u8]) -> Result<(), WgpuError> {
        let &t = self.shard_tensors.get(index).ok_or_else(|| {
            WgpuError::Validation(format!(
                "streamed tensor {index} is not in the shard's header"
            ))
        })?;
        let tensor = &mut self.tensors[t];
        if offset != tensor.written || offset + bytes.len() as u64 > tensor.info.size {
            return Err(WgpuError::Validation(format!(
                "tensor {}: bytes {offset}..{} arrived after {} of {}",
                tensor.info.name,
                offset + bytes.len() as u64,
                tensor.written,
                tensor.info.size
            )));
        }
        if tensor.weight.is_none() {
            tensor.weight = Some(allocate(&self.gpu, &tensor.info)?);
        }
        while !bytes.is_empty() {
            let (part, part_start, part_end, written) = self.next_part(t);
            let take = bytes.len().min((part_end - written) as usize);
            if (self.staging.tensor, self.staging.part) != (t, part)
                || self.staging.bytes.is_empty()
            {
                self.flush()?;
                if !self.staging.bytes.is_empty() {
                    let left = &self.tensors[self.staging.tensor].info.name;
                    return Err(WgpuError::Validation(format!(
                        "tensor {left} was left part-written for tensor {}",
                        self.tensors[t].info.name
                    )));
                }
                self.staging.tensor = t;
                self.staging.part = part;
                self.staging.at = written - part_start;
            }
            self.staging.bytes.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            let tensor = &mut self.tensors[t];
            tensor.written += take as u64;
            let part_done = tensor.written == part_end;
            if part_done || self.staging.bytes.len() >= STAGING_BYTES {
                self.write_staged(part_done)?;
            }
        }
        Ok(())
    }

    /// Tensor `t`'s part that takes its next byte: its index, its byte range in the tensor,
    /// and the bytes written so far.
    fn next_part(&self, t: usize) -> (usize, u64, u64, u64) {
        let tensor = &self.tensors[t];
        let weight = tensor.weight.as_ref().expect("allocated before writing");
        let row = (tensor.written / weight.row_bytes.max(1) as u64) as usize;
        let part = weight
            .parts
            .iter()
            .position(|p| row < p.row0 + p.rows)
            .expect("parts cover every row");
        let p = &weight.parts[part];
        let start = (p.row0 * weight.row_bytes) as u64;
        let end = start + (p.rows * weight.row_bytes) as u64;
        (part, start, end, tensor.written)
    }

    /// The streamed tensors as the weights of `store` (a model loaded from the same headers:
    /// [`gguf::GgufFile::from_headers`]). Fails if any tensor did not arrive whole. Tensors the
    /// model does not use are freed.
    pub fn finish(mut self, store: &WeightStore) -> Result<GpuWeights, WgpuError> {
        self.flush()?;
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for (i, t) in self.tensors.iter().enumerate() {
            if t.written != t.info.size {
                return Err(WgpuError::Validation(format!(
                    "tensor {}: {} of its {} bytes arrived",
                    t.info.name, t.written, t.info.size
                )));
            }
            by_name.insert(t.info.name.clone(), i);
        }
        let mut weights = Vec::with_capacity(store.len());
        for i in 0..store.len() {
            let id = WeightId(i as u32);
            let (d, name) = (store.desc(id), &store.get(id).name);
            let t = &mut self.tensors[*by_name.get(name).ok_or_else(|| {
                WgpuError::Validation(format!("weight {name} was not in the stream"))
            })?];
            // A tensor without bytes never had a piece that made its buffer.
            let weight = match t.weight.take() {
                Some(w) => w,
                None if t.info.size == 0 => allocate(&self.gpu, &t.info)?,
                None => {
                    return Err(WgpuError::Validation(format!(
                        "weight {name} is used twice"
                    )))
                }
            };
            if weight.ty != d.ty || weight.k != d.ne[0] || weight.n_rows != d.n_rows() {
                return Err(WgpuError::Validation(format!(
                    "weight {name}: the model's shape is not the streamed tensor's"
                )));
            }
            weights.push(weight);
        }
        self.gpu.queue.submit([]);
        self.gpu.check()?;
        Ok(GpuWeights {
            source: source_of(store),
            weights,
            bytes: store.total_bytes(),
        })
    }

    /// Writes what is staged (the current part's pending bytes).
    fn flush(&mut self) -> Result<(), WgpuError> {
        if !self.staging.bytes.is_empty() {
            let t = &self.tensors[self.staging.tensor];
            let weight = t.weight.as_ref().expect("staged bytes have a buffer");
            let part = &weight.parts[self.staging.part];
            let part_end = (part.row0 + part.rows) as u64 * weight.row_bytes as u64;
            self.write_staged(t.written == part_end)?;
        }
        Ok(())
    }

    /// Writes the staged bytes: all of them (zero-padded to 4 bytes) when `part_done`, else the
    /// whole words among them, keeping the last 0-3 bytes for the next write.
    fn write_staged(&mut self, part_done: bool) -> Result<(), WgpuError> {
        let s = &mut self.staging;
        let n = match part_done {
            true => {
                s.bytes.resize(s.bytes.len().next_multiple_of(4), 0);
                s.bytes.len()
            }
            false => s.bytes.len() / 4 * 4,
        };
        if n > 0 {
            let weight = self.tensors[s.tensor]
                .weight
                .as_ref()
                .expect("staged bytes have a buffer");
            let buffer = &weight.parts[s.part].buffer;
            self.gpu.queue.write_buffer(buffer, s.at, &s.bytes[..n]);
            s.bytes.drain(..n);
            s.at += n as u64;
            self.unsubmitted += n as u64;
        }
        if self.unsubmitted >= SUBMIT_BYTES {
            self.gpu.queue.submit([]);
            self.unsubmitted = 0;
            self.gpu.check()?;
        }
        Ok(())
    }
}

/// The empty buffers for one tensor (rows of `dims[0]` elements).
fn allocate(gpu: &Gpu, info: &TensorInfo) -> Result<GpuWeight, WgpuError> {
    let k = info.dims.first().copied().unwrap_or(1) as usize;
    let n_rows = info.dims.iter().skip(1).product::<u64>() as usize;
    let row_bytes = (info.size / n_rows.max(1) as u64) as usize;
    GpuWeight::allocate(gpu, &info.name, info.ty, k, n_rows, row_bytes, false)
}
