//! Receives a model's bytes chunk by chunk (a `fetch` body, a `File` stream) into the wasm heap.
//!
//! The bytes are copied once, straight into the buffer the model then runs from: the JS side
//! never assembles the whole file, so the model is never held twice. The header is checked as
//! soon as it has arrived, so a file that is not GGUF fails on its first chunk instead of after
//! the whole download.

use std::sync::Arc;

use tessera_core::Model;
use tessera_gguf::{GgufFile, StreamEvent, StreamParser};

use crate::errors::{ErrorCode, WasmError};

/// One shard being received.
struct ShardBuffer {
    bytes: Vec<u8>,
    /// Checks the header while it arrives; dropped once the header is complete so that tensor
    /// bytes are not copied a second time.
    header_check: Option<StreamParser>,
}

/// Collects one GGUF file, or the shards of a split one in order, then opens them as one model.
#[derive(Default)]
pub struct ModelLoader {
    shards: Vec<Vec<u8>>,
    current: Option<ShardBuffer>,
}

impl ModelLoader {
    pub fn new() -> ModelLoader {
        ModelLoader::default()
    }

    /// Starts the next shard (the only one, for an unsplit model). `expected_len` (from
    /// `Content-Length` or a `Blob`'s size) reserves the whole buffer at once, so it is never
    /// reallocated (a reallocation would hold the bytes twice for a moment).
    pub fn begin_shard(&mut self, expected_len: Option<u64>) -> Result<(), WasmError> {
        self.end_shard();
        let mut bytes = Vec::new();
        if let Some(n) = expected_len {
            let n = usize::try_from(n).map_err(|_| too_large(n))?;
            bytes
                .try_reserve_exact(n)
                .map_err(|_| too_large(n as u64))?;
        }
        self.current = Some(ShardBuffer {
            bytes,
            header_check: Some(StreamParser::pieces()),
        });
        Ok(())
    }

    /// Appends the next chunk of the current shard (starting one if none was begun).
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), WasmError> {
        if self.current.is_none() {
            self.begin_shard(None)?;
        }
        let shard = self.current.as_mut().expect("begun above");
        if let Some(parser) = shard.header_check.as_mut() {
            for event in parser.feed(chunk)? {
                if let StreamEvent::HeaderComplete(header) = event {
                    // The architecture, tensors and tokenizer are checked before the weights
                    // download.
                    Model::check_header(&header)?;
                    shard.header_check = None;
                }
            }
        }
        let wanted = shard.bytes.len() as u64 + chunk.len() as u64;
        shard
            .bytes
            .try_reserve(chunk.len())
            .map_err(|_| too_large(wanted))?;
        shard.bytes.extend_from_slice(chunk);
        Ok(())
    }

    /// Bytes received so far, all shards together.
    pub fn received(&self) -> u64 {
        let done: usize = self.shards.iter().map(Vec::len).sum();
        (done + self.current.as_ref().map_or(0, |s| s.bytes.len())) as u64
    }

    /// Opens what was received as one model file.
    pub fn finish(mut self) -> Result<Arc<GgufFile>, WasmError> {
        self.end_shard();
        let file = match self.shards.len() {
            0 => {
                return Err(WasmError::new(
                    ErrorCode::InvalidGguf,
                    "no model bytes were received",
                ))
            }
            1 => GgufFile::from_bytes(self.shards.pop().expect("one shard"))?,
            _ => GgufFile::from_shards(self.shards)?,
        };
        Ok(Arc::new(file))
    }

    fn end_shard(&mut self) {
        if let Some(shard) = self.current.take() {
            self.shards.push(shard.bytes);
        }
    }
}

fn too_large(n: u64) -> WasmError {
    WasmError::new(
        ErrorCode::OutOfMemory,
        format!(
            "cannot hold {n} bytes of model in the wasm heap (at most 4 GiB, less in practice)"
        ),
    )
}
