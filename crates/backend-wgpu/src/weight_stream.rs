//! A GGUF stream's tensors written into GPU buffers as their bytes arrive (the browser's
//! download, piece by piece), so the model's bytes never gather in host memory: at any moment
//! only one staging buffer of at most `STAGING_BYTES` is held.
//!
//! Each shard's header describes its tensors; their buffers are laid out like
//! [`weights::upload`]'s (rows split across bindings the adapter can take). When the stream's
//! length is known (and the header checked against it) every buffer is made at once, so a
//! model the GPU cannot hold fails before its download; otherwise each part (binding) is made
//! when its first byte arrives, so GPU memory runs at most one binding ahead of the bytes
//! received, whatever the header claims.

use std::collections::HashMap;

use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::{Header, TensorInfo};

use tessera_gpu::weights::{source_of, GpuWeight, GpuWeights, WeightPart};

use crate::device::Gpu;
use crate::error::WgpuError;
use crate::weights;

/// Bytes gathered before one `write_buffer`.
const STAGING_BYTES: usize = 1 << 20;
/// Bytes written between submissions (natively, written data waits in wgpu's staging memory
/// until the next submission).
const SUBMIT_BYTES: u64 = 64 << 20;

/// One tensor of the stream: its rows (of `dims[0]` elements) and the parts made so far.
struct StreamedTensor {
    info: TensorInfo,
    k: usize,
    n_rows: usize,
    row_bytes: usize,
    rows_per_part: usize,
    /// Made in order: all at once (known length) or each when its first byte arrives.
    parts: Vec<WeightPart<wgpu::Buffer>>,
    /// Bytes written so far.
    written: u64,
    /// Handed to the model by `finish`.
    taken: bool,
}

impl StreamedTensor {
    /// The layout of `info`'s rows, checked to be addressable here and to fit the bindings.
    fn new(gpu: &Gpu, info: &TensorInfo) -> Result<StreamedTensor, WgpuError> {
        let too_large = || WgpuError::Validation(format!("tensor {} is too large", info.name));
        let k = *info.dims.first().unwrap_or(&1);
        let n_rows = info
            .dims
            .iter()
            .skip(1)
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .ok_or_else(too_large)?;
        let row_bytes = info.size.checked_div(n_rows).unwrap_or(0);
        let to_usize = |v: u64| usize::try_from(v).map_err(|_| too_large());
        let row_bytes = to_usize(row_bytes)?;
        let rows_per_part = weights::rows_per_part(gpu, &info.name, info.ty, row_bytes)?;
        Ok(StreamedTensor {
            info: info.clone(),
            k: to_usize(k)?,
            n_rows: to_usize(n_rows)?,
            row_bytes,
            rows_per_part,
            parts: Vec::new(),
            written: 0,
            taken: false,
        })
    }

    /// Byte range (in the tensor) and rows of part `i`.
    fn part_span(&self, i: usize) -> (u64, u64, usize) {
        let row0 = i * self.rows_per_part;
        let rows = self.rows_per_part.min(self.n_rows - row0);
        let start = row0 as u64 * self.row_bytes as u64;
        (start, start + rows as u64 * self.row_bytes as u64, rows)
    }

    /// Makes the next part's buffer.
    fn add_part(&mut self, gpu: &Gpu) -> Result<(), WgpuError> {
        let i = self.parts.len();
        let (start, end, rows) = self.part_span(i);
        let buffer = weights::part_buffer(gpu, &self.info.name, end - start, false)?;
        self.parts.push(WeightPart {
            buffer,
            row0: i * self.rows_per_part,
            rows,
        });
        Ok(())
    }

    fn n_parts(&self) -> usize {
        self.n_rows.div_ceil(self.rows_per_part)
    }
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

    /// The next shard's header (as its stream reported it). Every tensor must be of a type the
    /// kernels read. `allocate_now`: make every buffer now, which the caller may do only once
    /// the header was checked against the stream's announced length
    /// ([`Header::check_tensors_within`]); else each part is made when its first byte arrives.
    pub fn begin_shard(&mut self, header: &Header, allocate_now: bool) -> Result<(), WgpuError> {
        self.flush()?;
        self.shard_tensors.clear();
        for info in &header.tensors {
            let mut tensor = StreamedTensor::new(&self.gpu, info)?;
            if allocate_now && info.size > 0 {
                while tensor.parts.len() < tensor.n_parts() {
                    tensor.add_part(&self.gpu)?;
                }
            }
            self.shard_tensors.push(self.tensors.len());
            self.tensors.push(tensor);
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
        let tensor = &self.tensors[t];
        if offset != tensor.written || offset + bytes.len() as u64 > tensor.info.size {
            return Err(WgpuError::Validation(format!(
                "tensor {}: bytes {offset}..{} arrived after {} of {}",
                tensor.info.name,
                offset + bytes.len() as u64,
                tensor.written,
                tensor.info.size
            )));
        }
        while !bytes.is_empty() {
            // The part holding the next byte (made now if it is its first), and how much of
            // `bytes` it and the staging buffer take.
            let tensor = &mut self.tensors[t];
            let written = tensor.written;
            let part = (written / tensor.row_bytes as u64) as usize / tensor.rows_per_part;
            if part == tensor.parts.len() {
                tensor.add_part(&self.gpu)?;
            }
            let (part_start, part_end, _) = tensor.part_span(part);
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
            let room = STAGING_BYTES - self.staging.bytes.len();
            let take = bytes.len().min((part_end - written) as usize).min(room);
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

    /// The streamed tensors as the weights of `store` (a model loaded from the same headers:
    /// [`tessera_gguf::GgufFile::from_headers`]). Fails if any tensor did not arrive whole. Tensors the
    /// model does not use are freed.
    pub fn finish(mut self, store: &WeightStore) -> Result<GpuWeights<wgpu::Buffer>, WgpuError> {
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
            if t.taken || t.info.size == 0 {
                return Err(WgpuError::Validation(format!(
                    "weight {name} is empty or used twice"
                )));
            }
            if t.info.ty != d.ty || t.k != d.ne[0] || t.n_rows != d.n_rows() {
                return Err(WgpuError::Validation(format!(
                    "weight {name}: the model's shape is not the streamed tensor's"
                )));
            }
            t.taken = true;
            weights.push(GpuWeight {
                ty: t.info.ty,
                k: t.k,
                n_rows: t.n_rows,
                row_bytes: t.row_bytes,
                parts: std::mem::take(&mut t.parts),
            });
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
            let (_, part_end, _) = t.part_span(self.staging.part);
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
            // Part buffers are rounded up to whole words (`Gpu::buffer`), so the padding fits.
            let buffer = &self.tensors[s.tensor].parts[s.part].buffer;
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
