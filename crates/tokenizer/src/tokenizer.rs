//! Tokenizers built from GGUF metadata, matching llama.cpp token for token.
//!
//! - `tokenizer.ggml.model = "gpt2"`: byte-level BPE with the pre-tokenizer named by
//!   `tokenizer.ggml.pre` ([`bpe`], [`pretokenize`]).
//! - `tokenizer.ggml.model = "llama"`: SentencePiece-style score-driven merges with `<0xXX>`
//!   byte fallback ([`spm`]), as Gemma and Llama 2 use it.
//! - `tokenizer.ggml.model = "bert"`: WordPiece with BERT's normalizer ([`wpm`]); encoding
//!   with special tokens wraps the text in `[CLS]` ... `[SEP]`.
//!
//! Special tokens (control / user-defined) are cut out of the text first ([`special`]);
//! BOS/EOS and the SentencePiece space prefix follow the model's policy exactly as llama.cpp
//! applies it. [`StreamDecoder`] turns generated ids into text without ever emitting half a
//! UTF-8 character.

mod bpe;
mod load;
pub mod pretokenize;
mod special;
mod spm;
mod stream_decoder;
pub mod unicode;
mod unicode_data;
mod vocab;
mod wpm;

pub use stream_decoder::StreamDecoder;
pub use vocab::attr;

use std::ops::Range;

use bpe::BpeModel;
use special::{Fragment, SpecialTokens};
use vocab::Vocab;
use wpm::WpmModel;

/// What is wrong with a model's tokenizer metadata.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("GGUF metadata has no {0}")]
    MissingKey(&'static str),
    #[error("GGUF metadata key {key} has the wrong type (expected {expected})")]
    WrongType {
        key: &'static str,
        expected: &'static str,
    },
    #[error("unsupported tokenizer model {0:?} (supported: gpt2, llama, gemma4, bert)")]
    UnsupportedModel(String),
    #[error("unsupported BPE pre-tokenizer {0:?}")]
    UnsupportedPreTokenizer(String),
    #[error("bad tokenizer metadata: {0}")]
    BadMetadata(String),
}

/// Which algorithm turns raw text fragments into ids.
enum Model {
    Bpe(Box<BpeModel>),
    Spm,
    Wpm(WpmModel),
}

pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    special: SpecialTokens,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    eom: Option<u32>,
    pad: Option<u32>,
    unk: Option<u32>,
    /// Separator (`[SEP]`), which WordPiece models put after the text.
    sep: Option<u32>,
    /// End-of-generation ids, sorted.
    eog: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    /// Whether `encode` with `add_special` ends with [`Tokenizer::sep`] (WordPiece).
    add_sep: bool,
    add_space_prefix: bool,
    /// BPE "clean up tokenization spaces" on detokenize (" ." -> "." ...).
    clean_spaces: bool,
    /// Each token's text as bytes, with special tokens rendered (llama.cpp's piece cache).
    pieces: Vec<Vec<u8>>,
}

impl Tokenizer {
    /// Build the tokenizer a GGUF header describes.
    pub fn from_gguf(header: &tessera_gguf::Header) -> Result<Tokenizer, TokenizerError> {
        load::from_header(header)
    }

    /// Tokenize `text`. `add_special` adds BOS/EOS as the model's policy says (`add_bos()`,
    /// `tokenizer.ggml.add_eos_token`), and SEP after the text for WordPiece (`add_sep()`);
    /// `parse_special` turns the text of control tokens such as `<|im_start|>` into their ids
    /// (user-defined tokens are always matched).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.encode_fragments(text, add_special, parse_special, &[])
    }

    /// [`encode`](Self::encode) with `parse_special` on, except in the byte ranges `text_spans`
    /// of `text` (sorted, disjoint; e.g. the messages' contents in a rendered chat): a control
    /// token whose text overlaps one of them is not matched, so those bytes tokenize as
    /// `encode(.., parse_special = false)` tokenizes them. Nothing is cut at the ranges'
    /// edges: the text around them is tokenized as one piece, as llama.cpp tokenizes the text
    /// between two special tokens.
    pub fn encode_with_text_spans(
        &self,
        text: &str,
        add_special: bool,
        text_spans: &[Range<usize>],
    ) -> Vec<u32> {
        self.encode_fragments(text, add_special, true, text_spans)
    }

    /// Whether `text` holds the text of a control (or unknown) token, which `encode` turns into
    /// that token only with `parse_special`.
    pub fn has_control_text(&self, text: &str) -> bool {
        self.special.has_gated_text(&self.vocab, text)
    }

    fn encode_fragments(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
        text_spans: &[Range<usize>],
    ) -> Vec<u32> {
        let fragments = self
            .special
            .partition(&self.vocab, text, parse_special, text_spans);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            if let Some(bos) = self.bos {
                out.push(bos);
            }
        }
        match &self.model {
            Model::Bpe(bpe) => {
                for frag in fragments {
                    match frag {
                        Fragment::Raw(a, b) if bpe.raw => {
                            let escaped = text[a..b].replace(' ', "\u{2581}");
                            bpe.encode(&self.vocab, &escaped, &mut out)
                        }
                        Fragment::Raw(a, b) => bpe.encode(&self.vocab, &text[a..b], &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            Model::Spm => {
                // The space prefix goes before the first raw fragment and after each special
                // token (llama.cpp: "prefix with space if previous is special").
                let mut prev_special = true;
                let mut buf = String::new();
                for frag in fragments {
                    match frag {
                        Fragment::Raw(a, b) => {
                            buf.clear();
                            if self.add_space_prefix && prev_special {
                                buf.push('\u{2581}');
                            }
                            for c in text[a..b].chars() {
                                buf.push(if c == ' ' { '\u{2581}' } else { c });
                            }
                            spm::encode(&self.vocab, &buf, &mut out);
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            Model::Wpm(wpm) => {
                for frag in fragments {
                    match frag {
                        Fragment::Raw(a, b) => {
                            wpm.encode(&self.vocab, self.unk, &text[a..b], &mut out)
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && self.add_eos {
            if let Some(eos) = self.eos {
                out.push(eos);
            }
        }
        if add_special && self.add_sep {
            if let Some(sep) = self.sep {
                out.push(sep);
            }
        }
        out
    }

    /// Detokenize (llama.cpp's `common_detokenize`): the pieces of `ids` concatenated, with the
    /// SentencePiece leading space removed and BPE spaces cleaned up where the model asks for
    /// it. `special` renders control tokens' text; without it they vanish. Invalid UTF-8 (a
    /// code point split by the end of `ids`) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32], special: bool) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        let mut remove_space = self.add_space_prefix;
        for &id in ids {
            let piece = self.token_to_piece(id, special);
            let piece = if remove_space && piece.first() == Some(&b' ') {
                &piece[1..]
            } else {
                &piece[..]
            };
            bytes.extend_from_slice(piece);
            remove_space = false;
        }
        if self.clean_spaces {
            bytes = clean_up_spaces(&bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The bytes one token stands for (may be part of a UTF-8 character). Control and unknown
    /// tokens give their text with `special`, nothing without it; an id outside the vocabulary
    /// gives nothing.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Vec<u8> {
        if !special && self.vocab.has_attr(id, attr::CONTROL | attr::UNKNOWN) {
            return Vec::new();
        }
        self.pieces.get(id as usize).cloned().unwrap_or_default()
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// End-of-turn token (`tokenizer.ggml.eot_token_id`, or found by text like llama.cpp).
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }

    /// End-of-message token (`<|eom_id|>`).
    pub fn eom(&self) -> Option<u32> {
        self.eom
    }

    pub fn pad(&self) -> Option<u32> {
        self.pad
    }

    pub fn unk(&self) -> Option<u32> {
        self.unk
    }

    /// Separator token (`[SEP]` for BERT, `tokenizer.ggml.seperator_token_id`).
    pub fn sep(&self) -> Option<u32> {
        self.sep
    }

    /// Whether generation should stop at `id` (EOS, EOT, EOM, `<end_of_turn>`, `<|im_end|>` ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// All end-of-generation ids, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    /// Whether `encode(.., add_special = true, ..)` starts with BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }

    pub fn add_eos(&self) -> bool {
        self.add_eos && self.eos.is_some()
    }

    /// Whether `encode(.., add_special = true, ..)` ends with SEP (WordPiece models).
    pub fn add_sep(&self) -> bool {
        self.add_sep && self.sep.is_some()
    }

    /// The token's text as stored in the model (`▁` for SentencePiece spaces, GPT-2 byte
    /// characters for BPE).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.text(id)
    }

    /// The token's attribute bits ([`attr`]).
    pub fn token_attr(&self, id: u32) -> u32 {
        self.vocab.attr(id)
    }

    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.has_attr(id, attr::CONTROL)
    }

    /// The id of a token with exactly this text.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id_of(text)
    }
}

/// llama.cpp's `clean_up_tokenization_spaces` passes over the detokenized bytes, done in place
/// the way llama.cpp does them (its second pass overwrites a skipped space with NUL, which the
/// following comparisons then see).
fn clean_up_spaces(text: &[u8]) -> Vec<u8> {
    let mut t = text.to_vec();
    // " ?", " !", " .", " ," lose the space.
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
    // " ' " loses both spaces.
    let n = t.len();
    let mut total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = t[i];
        if x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            total -= 1;
            i += 1;
            t[i] = 0;
        }
        t[total] = x;
        total += 1;
        i += 1;
    }
    t.truncate(total);
    // " 's", " 'm", " 're", " 've" lose the space.
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            let drop = match x1 {
                b's' | b'm' => true,
                b't' | b'd' => false,
                _ => i + 2 < n && matches!((x1, t[i + 2]), (b'r', b'e') | (b'v', b'e')),
            };
            if drop {
                total -= 1;
            }
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
    t
}

#[cfg(test)]
mod tests {
    use super::clean_up_spaces;

    #[test]
    fn cleans_spaces_like_llama_cpp() {
        assert_eq!(clean_up_spaces(b"a , b ."), b"a, b.");
        assert_eq!(clean_up_spaces(b"x ' y"), b"x'y");
        assert_eq!(
            clean_up_spaces(b"it 's I 'm we 're don 't"),
            b"it's I'm we're don 't"
        );
        assert_eq!(clean_up_spaces(b"a ' ' b"), b"a'' b");
    }
}
