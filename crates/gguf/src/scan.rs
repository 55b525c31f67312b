//! Finding where a GGUF header ends while its bytes are still arriving, without allocating
//! anything sized by the file and without re-reading what was already scanned: the scanner
//! keeps its place (which metadata entry, which nested array element) between calls.
//!
//! It only measures; the full checks happen when the complete header is handed to
//! `parse_header`. It does refuse early what can never become valid (bad magic or version,
//! unknown value types, too-deep nesting, sizes beyond the header size limit), so a hostile
//! stream fails fast instead of being buffered.

use crate::parse::{min_encoded_size, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS};
use crate::{GgufError, ValueType};

/// Why a scan step stopped.
pub(crate) enum Stop {
    /// The bytes so far end inside the next item; feed more.
    NeedMore,
    Bad(GgufError),
}

impl From<GgufError> for Stop {
    fn from(e: GgufError) -> Stop {
        Stop::Bad(e)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Preamble,
    Key,
    ValueType,
    Value,
    TensorInfo,
    Done,
}

pub(crate) struct HeaderScanner {
    /// Offset of the first byte not yet consumed.
    pos: u64,
    limit: u64,
    phase: Phase,
    kv_left: u64,
    tensors_left: u64,
    /// The current key, for error messages (bounded by bytes that arrived).
    key: String,
    /// A value of this type is next.
    pending: Option<ValueType>,
    /// Open arrays: element type and elements not yet started.
    arrays: Vec<(ValueType, u64)>,
}

fn fixed_size(ty: ValueType) -> Option<u64> {
    match ty {
        ValueType::String | ValueType::Array => None,
        t => Some(min_encoded_size(t)),
    }
}

impl HeaderScanner {
    /// `limit`: the largest header accepted, in bytes.
    pub(crate) fn new(limit: u64) -> HeaderScanner {
        HeaderScanner {
            pos: 0,
            limit,
            phase: Phase::Preamble,
            kv_left: 0,
            tensors_left: 0,
            key: String::new(),
            pending: None,
            arrays: Vec::new(),
        }
    }

    /// The header's end (before alignment padding), once it has been found.
    pub(crate) fn header_end(&self) -> Option<u64> {
        (self.phase == Phase::Done).then_some(self.pos)
    }

    /// Consumes whatever complete items `buf` (the stream from offset 0) now holds.
    pub(crate) fn advance(&mut self, buf: &[u8]) -> Result<(), GgufError> {
        loop {
            match self.step(buf) {
                Ok(true) => continue,
                Ok(false) | Err(Stop::NeedMore) => return Ok(()),
                Err(Stop::Bad(e)) => return Err(e),
            }
        }
    }

    /// Bytes `[pos + at, pos + at + n)`, if they arrived and stay within the size limit.
    fn peek<'b>(&self, buf: &'b [u8], at: u64, n: u64) -> Result<&'b [u8], Stop> {
        let end = self
            .pos
            .checked_add(at)
            .and_then(|p| p.checked_add(n))
            .filter(|&e| e <= self.limit)
            .ok_or(GgufError::HeaderTooLarge {
                limit: self.limit,
                offset: self.pos,
            })?;
        if end > buf.len() as u64 {
            return Err(Stop::NeedMore);
        }
        Ok(&buf[(self.pos + at) as usize..end as usize])
    }

    fn peek_u32(&self, buf: &[u8], at: u64) -> Result<u32, Stop> {
        let b = self.peek(buf, at, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn peek_u64(&self, buf: &[u8], at: u64) -> Result<u64, Stop> {
        let b = self.peek(buf, at, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Length in bytes of the string at `pos + at` (prefix included), if it all arrived.
    fn peek_string(&self, buf: &[u8], at: u64) -> Result<u64, Stop> {
        let len = self.peek_u64(buf, at)?;
        let total = len.checked_add(8).ok_or(GgufError::HeaderTooLarge {
            limit: self.limit,
            offset: self.pos,
        })?;
        self.peek(buf, at, total)?;
        Ok(total)
    }

    /// Ensures `count * min` more bytes could still fit under the limit.
    fn check_fits(&self, count: u64, min: u64) -> Result<(), Stop> {
        let fits = count
            .checked_mul(min)
            .and_then(|n| n.checked_add(self.pos))
            .is_some_and(|end| end <= self.limit);
        if fits {
            Ok(())
        } else {
            Err(Stop::Bad(GgufError::HeaderTooLarge {
                limit: self.limit,
                offset: self.pos,
            }))
        }
    }

    /// Consumes one item. `Ok(false)` once the header is complete.
    fn step(&mut self, buf: &[u8]) -> Result<bool, Stop> {
        match self.phase {
            Phase::Preamble => {
                let magic = self.peek(buf, 0, 4)?;
                if magic != MAGIC {
                    return Err(Stop::Bad(GgufError::BadMagic {
                        found: [magic[0], magic[1], magic[2], magic[3]],
                    }));
                }
                let version = self.peek_u32(buf, 4)?;
                if version != 2 && version != 3 {
                    return Err(Stop::Bad(GgufError::UnsupportedVersion { version }));
                }
                self.tensors_left = self.peek_u64(buf, 8)?;
                self.kv_left = self.peek_u64(buf, 16)?;
                self.pos = 24;
                self.check_fits(self.kv_left, 13)?;
                self.check_fits(self.tensors_left, 24)?;
                self.phase = if self.kv_left > 0 {
                    Phase::Key
                } else {
                    Phase::TensorInfo
                };
            }
            Phase::Key => {
                let n = self.peek_string(buf, 0)?;
                let bytes = &buf[(self.pos + 8) as usize..(self.pos + n) as usize];
                self.key = String::from_utf8_lossy(bytes).into_owned();
                self.pos += n;
                self.phase = Phase::ValueType;
            }
            Phase::ValueType => {
                let id = self.peek_u32(buf, 0)?;
                let ty = ValueType::from_id(id).ok_or_else(|| GgufError::UnknownValueType {
                    key: self.key.clone(),
                    id,
                    offset: self.pos,
                })?;
                self.pos += 4;
                self.pending = Some(ty);
                self.phase = Phase::Value;
            }
            Phase::Value => self.step_value(buf)?,
            Phase::TensorInfo => {
                if self.tensors_left == 0 {
                    self.phase = Phase::Done;
                    return Ok(false);
                }
                let name = self.peek_string(buf, 0)?;
                let n_dims = self.peek_u32(buf, name)?;
                if n_dims > MAX_DIMS {
                    return Err(Stop::Bad(GgufError::TooManyDims {
                        name: String::from_utf8_lossy(
                            &buf[(self.pos + 8) as usize..(self.pos + name) as usize],
                        )
                        .into_owned(),
                        n_dims,
                        max: MAX_DIMS,
                        offset: self.pos + name,
                    }));
                }
                let n = name + 4 + 8 * n_dims as u64 + 4 + 8;
                self.peek(buf, 0, n)?;
                self.pos += n;
                self.tensors_left -= 1;
            }
            Phase::Done => return Ok(false),
        }
        Ok(true)
    }

    fn step_value(&mut self, buf: &[u8]) -> Result<(), Stop> {
        if let Some(ty) = self.pending {
            match ty {
                ValueType::String => self.pos += self.peek_string(buf, 0)?,
                ValueType::Array => {
                    if self.arrays.len() as u32 >= MAX_ARRAY_DEPTH {
                        return Err(Stop::Bad(GgufError::NestingTooDeep {
                            key: self.key.clone(),
                            max: MAX_ARRAY_DEPTH,
                            offset: self.pos,
                        }));
                    }
                    let id = self.peek_u32(buf, 0)?;
                    let count = self.peek_u64(buf, 4)?;
                    let elem =
                        ValueType::from_id(id).ok_or_else(|| GgufError::UnknownValueType {
                            key: self.key.clone(),
                            id,
                            offset: self.pos,
                        })?;
                    self.pos += 12;
                    self.check_fits(count, min_encoded_size(elem))?;
                    self.arrays.push((elem, count));
                }
                fixed => {
                    let n = fixed_size(fixed).unwrap_or(0);
                    self.peek(buf, 0, n)?;
                    self.pos += n;
                }
            }
            self.pending = None;
            return Ok(());
        }
        let Some(&(elem, left)) = self.arrays.last() else {
            // The whole value is consumed: next entry.
            self.kv_left -= 1;
            self.phase = if self.kv_left > 0 {
                Phase::Key
            } else {
                Phase::TensorInfo
            };
            return Ok(());
        };
        if left == 0 {
            self.arrays.pop();
            return Ok(());
        }
        match fixed_size(elem) {
            // Runs of fixed-size elements are consumed as far as they arrived, in one go.
            Some(size) => {
                let arrived = (buf.len() as u64).saturating_sub(self.pos) / size;
                let k = left.min(arrived);
                if k == 0 {
                    self.peek(buf, 0, size)?;
                }
                self.pos += k * size;
                self.arrays.last_mut().expect("checked above").1 -= k;
            }
            None => {
                self.arrays.last_mut().expect("checked above").1 -= 1;
                self.pending = Some(elem);
            }
        }
        Ok(())
    }
}
