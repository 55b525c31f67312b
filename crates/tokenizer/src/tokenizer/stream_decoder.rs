//! Streaming detokenization that never emits half a UTF-8 character.

use super::Tokenizer;

/// Turns generated ids into text as they arrive. Bytes of a character split across tokens
/// (common with byte-level BPE and `<0xXX>` byte tokens) are held back until the token that
/// completes them; [`StreamDecoder::finish`] flushes what is left, with U+FFFD for bytes that
/// never formed a character. Pieces are the tokens' own (no leading-space removal: a stream
/// continues a prompt).
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    special: bool,
    pending: Vec<u8>,
}

impl<'a> StreamDecoder<'a> {
    /// `special`: render control tokens' text (as [`Tokenizer::token_to_piece`]).
    pub fn new(tokenizer: &'a Tokenizer, special: bool) -> StreamDecoder<'a> {
        StreamDecoder {
            tokenizer,
            special,
            pending: Vec::new(),
        }
    }

    /// Add one token; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        let piece = self.tokenizer.token_to_piece(id, self.special);
        self.push_bytes(&piece)
    }

    /// Add raw bytes; returns the text that is now complete.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // `valid` is the prefix from_utf8 just accepted.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: keep it for the next token.
                        None => {
                            rest = after;
                            break;
                        }
                        // Bytes that can never start a character: replace them and go on.
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Flush: whatever is held back, with U+FFFD for incomplete characters.
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}
