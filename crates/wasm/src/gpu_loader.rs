//! Receives a model's bytes chunk by chunk (a `fetch` body, a `File` stream) straight into
//! WebGPU buffers: each tensor's bytes are written to the GPU as they arrive and dropped, so the
//! wasm heap holds only the headers, never the model (whose size may then exceed what a wasm32
//! heap can address).
//!
//! The same interface as [`crate::loader::ModelLoader`] (`begin_shard`, `push`, `received`),
//! so the worker feeds either the same way. A file that is not GGUF fails on its first chunk, a
//! tensor type the kernels lack once the header has arrived; with a known length, so do a
//! header that does not fit it and a model the GPU cannot hold, before the rest is downloaded.

use std::sync::Arc;

use tessera_backend_wgpu::{Gpu, WeightStream, WgpuBackend, WgpuError};
use tessera_core::{EngineError, Model};
use tessera_gguf::{GgufFile, Header, StreamEvent, StreamParser};

use crate::errors::{ErrorCode, WasmError};
use crate::options::LoadOptions;
use crate::session::Session;

/// The shard being received.
struct Shard {
    parser: StreamParser,
    expected_len: Option<u64>,
}

/// Collects one GGUF file, or the shards of a split one in order, into GPU buffers.
pub struct GpuModelLoader {
    gpu: Gpu,
    stream: WeightStream,
    /// Each shard's header, in order.
    headers: Vec<Header>,
    current: Option<Shard>,
    received: u64,
}

impl GpuModelLoader {
    pub fn new(gpu: Gpu) -> GpuModelLoader {
        GpuModelLoader {
            stream: WeightStream::new(gpu.clone()),
            gpu,
            headers: Vec::new(),
            current: None,
            received: 0,
        }
    }

    /// Starts the next shard (the only one, for an unsplit model). `expected_len` (from
    /// `Content-Length` or a `Blob`'s size) lets the header be checked against it and every GPU
    /// buffer be made as soon as the header has arrived.
    pub fn begin_shard(&mut self, expected_len: Option<u64>) -> Result<(), WasmError> {
        self.end_shard()?;
        self.current = Some(Shard {
            parser: StreamParser::pieces(),
            expected_len,
        });
        Ok(())
    }

    /// Takes the next chunk of the current shard (starting one if none was begun) and writes
    /// its tensor bytes to the GPU.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), WasmError> {
        if self.current.is_none() {
            self.begin_shard(None)?;
        }
        let shard = self.current.as_mut().expect("begun above");
        for event in shard.parser.feed(chunk)? {
            match event {
                StreamEvent::HeaderComplete(header) => {
                    if let Some(len) = shard.expected_len {
                        header.check_tensors_within(len)?;
                    }
                    self.stream
                        .begin_shard(&header, shard.expected_len.is_some())
                        .map_err(gpu_error)?;
                    // The architecture, tensors and tokenizer before the weights download.
                    Model::check_header(&header)?;
                    self.headers.push(header);
                }
                StreamEvent::TensorPiece {
                    index,
                    offset_in_tensor,
                    bytes,
                    ..
                } => self
                    .stream
                    .write(index, offset_in_tensor, &bytes)
                    .map_err(gpu_error)?,
                // Piece mode never hands out whole tensors.
                StreamEvent::TensorReady { .. } => {}
            }
        }
        self.received += chunk.len() as u64;
        // An allocation the browser refused is reported asynchronously: it surfaces here, a
        // chunk or two later, instead of after the whole download.
        self.gpu.check().map_err(gpu_error)
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Bytes received so far, all shards together.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Opens the streamed model on the GPU and makes its session (asynchronous read-back,
    /// sampling on the device).
    pub fn finish(mut self, options: &LoadOptions) -> Result<Session, WasmError> {
        self.end_shard()?;
        if self.headers.is_empty() {
            return Err(WasmError::new(
                ErrorCode::InvalidGguf,
                "no model bytes were received",
            ));
        }
        let file = GgufFile::from_headers(std::mem::take(&mut self.headers))?;
        let model = Arc::new(Model::load(Arc::new(file), &mut |_| {})?);
        let weights = self.stream.finish(model.weights()).map_err(gpu_error)?;
        let mut backend = WgpuBackend::with_gpu(self.gpu);
        backend.set_async_read_back(true);
        backend.set_weights(weights);
        backend.gpu().check().map_err(gpu_error)?;
        Session::with_backend(model, options, Box::new(backend), true)
    }

    /// Ends the current shard: all of its tensors must have arrived.
    fn end_shard(&mut self) -> Result<(), WasmError> {
        if let Some(shard) = self.current.take() {
            shard.parser.finish()?;
        }
        Ok(())
    }
}

/// A tensor type the kernels lack is the model's problem; anything else is the device's.
fn gpu_error(e: WgpuError) -> WasmError {
    match e {
        WgpuError::UnsupportedType { .. } => {
            WasmError::new(ErrorCode::UnsupportedType, e.to_string())
        }
        other => EngineError::from(other).into(),
    }
}
