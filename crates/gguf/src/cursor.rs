//! A bounds-checked little-endian reader over a byte slice. Every read checks the remaining
//! length first, so a truncated or lying file yields `GgufError::Truncated`, never a panic.

use crate::GgufError;

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    pub(crate) fn pos(&self) -> u64 {
        self.pos as u64
    }

    pub(crate) fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    pub(crate) fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what: what.to_string(),
                offset: self.pos(),
                needed: n,
                available: self.remaining(),
            });
        }
        // `n <= remaining <= usize::MAX`, so the cast is lossless.
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        let b = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, GgufError> {
        self.array(what).map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 byte length, then UTF-8 bytes. The length is checked against the
    /// remaining bytes before anything is allocated.
    pub(crate) fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let len = self.u64(what)?;
        let at = self.pos();
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(GgufError::InvalidUtf8 {
                what: what.to_string(),
                offset: at + e.valid_up_to() as u64,
            }),
        }
    }

    /// Fails unless `count` items of at least `min_item_bytes` each can fit in what remains;
    /// call before allocating room for `count` items.
    pub(crate) fn check_count(
        &self,
        count: u64,
        min_item_bytes: u64,
        what: &str,
        at: u64,
    ) -> Result<(), GgufError> {
        let fits = count
            .checked_mul(min_item_bytes)
            .is_some_and(|need| need <= self.remaining());
        if fits {
            Ok(())
        } else {
            Err(GgufError::CountTooLarge {
                what: what.to_string(),
                offset: at,
                count,
                min_item_bytes,
                available: self.remaining(),
            })
        }
    }
}
