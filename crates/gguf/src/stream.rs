//! Reading a GGUF file from a byte stream (e.g. a `fetch` body in the browser), chunk by chunk.
//!
//! The header is reported as soon as its last byte arrived. After that only the current tensor
//! is held (or nothing, in piece mode): the data section is never buffered whole, so a 2 GB
//! model streamed into GPU buffers needs no 2 GB of wasm heap.

use std::ops::Range;

use crate::parse::data_order;
use crate::scan::HeaderScanner;
use crate::{parse_header, GgufError, Header};

/// Largest header the stream parser buffers by default (Gemma 3's header, with its 262k-token
/// vocabulary, is about 6 MB).
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 256 << 20;

/// Header bytes are appended at most this many at a time, so a huge first chunk is not copied
/// whole into the header buffer.
const HEADER_FEED_STEP: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// The complete header (emitted once, first).
    HeaderComplete(Header),
    /// All bytes of `header.tensors[index]`; `range` is their absolute position in the file.
    /// (Whole-tensor mode, the default.)
    TensorReady {
        index: usize,
        range: Range<u64>,
        bytes: Vec<u8>,
    },
    /// Bytes of `header.tensors[index]` starting at `offset_in_tensor`; `last` marks the piece
    /// that completes the tensor. (Piece mode: nothing is buffered.)
    TensorPiece {
        index: usize,
        offset_in_tensor: u64,
        bytes: Vec<u8>,
        last: bool,
    },
}

enum State {
    Header {
        buf: Vec<u8>,
        scanner: HeaderScanner,
    },
    Data(DataState),
    Failed,
}

struct PendingTensor {
    index: usize,
    name: String,
    /// Absolute byte range in the file.
    range: Range<u64>,
}

struct DataState {
    /// The tensors in the order their bytes appear in the file.
    order: Vec<PendingTensor>,
    next: usize,
    /// Absolute offset of the next byte to arrive.
    pos: u64,
    /// Bytes of the current tensor so far (whole-tensor mode).
    current: Vec<u8>,
}

/// Incremental GGUF parser: `feed` it chunks, act on the events it returns, then `finish`.
pub struct StreamParser {
    state: State,
    pieces: bool,
}

impl Default for StreamParser {
    fn default() -> Self {
        StreamParser::new()
    }
}

impl StreamParser {
    /// Whole-tensor mode: each tensor comes as one `TensorReady` with its bytes.
    pub fn new() -> StreamParser {
        StreamParser::with_max_header_bytes(DEFAULT_MAX_HEADER_BYTES)
    }

    /// Whole-tensor mode with a different header size limit.
    pub fn with_max_header_bytes(limit: u64) -> StreamParser {
        StreamParser {
            state: State::Header {
                buf: Vec::new(),
                scanner: HeaderScanner::new(limit),
            },
            pieces: false,
        }
    }

    /// Piece mode: tensor bytes are handed out as `TensorPiece`s as they arrive, never held.
    pub fn pieces() -> StreamParser {
        StreamParser {
            pieces: true,
            ..StreamParser::new()
        }
    }

    /// Whether the header and every tensor have arrived.
    pub fn is_complete(&self) -> bool {
        matches!(&self.state, State::Data(d) if d.next == d.order.len())
    }

    /// Bytes consumed so far (the absolute offset of the next byte expected).
    pub fn position(&self) -> u64 {
        match &self.state {
            State::Header { buf, .. } => buf.len() as u64,
            State::Data(d) => d.pos,
            State::Failed => 0,
        }
    }

    /// Takes the next chunk of the stream. After an error the parser stays failed.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<StreamEvent>, GgufError> {
        let mut events = Vec::new();
        match self.feed_inner(chunk, &mut events) {
            Ok(()) => Ok(events),
            Err(e) => {
                self.state = State::Failed;
                Err(e)
            }
        }
    }

    fn feed_inner(
        &mut self,
        mut chunk: &[u8],
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), GgufError> {
        while let State::Header { buf, scanner } = &mut self.state {
            if chunk.is_empty() {
                return Ok(());
            }
            let step = chunk.len().min(HEADER_FEED_STEP);
            buf.extend_from_slice(&chunk[..step]);
            chunk = &chunk[step..];
            scanner.advance(buf)?;
            let Some(end) = scanner.header_end() else {
                continue;
            };
            let header = parse_header(&buf[..end as usize])?;
            let order: Vec<PendingTensor> = data_order(&header.tensors)
                .into_iter()
                .map(|index| {
                    let t = &header.tensors[index];
                    // parse_header checked these sums do not overflow.
                    let start = header.data_offset + t.offset;
                    PendingTensor {
                        index,
                        name: t.name.clone(),
                        range: start..start + t.size,
                    }
                })
                .collect();
            let tail = buf.split_off(end as usize);
            let mut data = DataState {
                order,
                next: 0,
                pos: end,
                current: Vec::new(),
            };
            events.push(StreamEvent::HeaderComplete(header));
            data.take(&tail, self.pieces, events);
            self.state = State::Data(data);
        }
        match &mut self.state {
            State::Data(data) => data.take(chunk, self.pieces, events),
            State::Failed => return Err(GgufError::StreamFailed),
            State::Header { .. } => unreachable!("the loop above leaves the header state"),
        }
        Ok(())
    }

    /// Call at the end of the stream: fails if the header or any tensor is incomplete.
    pub fn finish(&self) -> Result<(), GgufError> {
        match &self.state {
            State::Header { buf, .. } => Err(GgufError::Truncated {
                what: "header (stream ended)".into(),
                offset: buf.len() as u64,
                needed: 1,
                available: 0,
            }),
            State::Data(d) if d.next < d.order.len() => {
                let t = &d.order[d.next];
                Err(GgufError::Truncated {
                    what: format!("data of tensor `{}` (stream ended)", t.name),
                    offset: d.pos,
                    needed: t.range.end - d.pos,
                    available: 0,
                })
            }
            State::Data(_) => Ok(()),
            State::Failed => Err(GgufError::StreamFailed),
        }
    }
}

impl DataState {
    /// Routes the bytes of `chunk` (starting at `self.pos`) to the tensors they belong to.
    fn take(&mut self, mut chunk: &[u8], pieces: bool, events: &mut Vec<StreamEvent>) {
        while let Some(t) = self.order.get(self.next) {
            let (index, range) = (t.index, t.range.clone());
            if self.pos < range.start {
                // Padding or gap before the tensor.
                let skip = (range.start - self.pos).min(chunk.len() as u64);
                chunk = &chunk[skip as usize..];
                self.pos += skip;
                if self.pos < range.start {
                    return;
                }
            }
            let n = (range.end - self.pos).min(chunk.len() as u64) as usize;
            let last = self.pos + n as u64 == range.end;
            if pieces {
                if n > 0 || last {
                    events.push(StreamEvent::TensorPiece {
                        index,
                        offset_in_tensor: self.pos - range.start,
                        bytes: chunk[..n].to_vec(),
                        last,
                    });
                }
            } else {
                // Grows with what arrived, never by the size the header claims.
                self.current.extend_from_slice(&chunk[..n]);
            }
            chunk = &chunk[n..];
            self.pos += n as u64;
            if !last {
                return;
            }
            if !pieces {
                events.push(StreamEvent::TensorReady {
                    index,
                    range,
                    bytes: std::mem::take(&mut self.current),
                });
            }
            self.next += 1;
        }
    }
}
