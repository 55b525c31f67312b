//! The vocabulary: token texts, scores and attributes as llama.cpp loads them from GGUF
//! metadata, including the attribute fix-ups it applies by token text.

use std::collections::HashMap;

use super::TokenizerError;

/// Token attributes (llama.cpp's `llama_token_attr` bits).
pub mod attr {
    pub const UNDEFINED: u32 = 0;
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    /// Special tokens such as `<bos>`, `<|im_end|>`.
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
    pub const LSTRIP: u32 = 1 << 7;
    pub const RSTRIP: u32 = 1 << 8;

    /// GGUF `tokenizer.ggml.token_type` values to attributes.
    pub fn from_token_type(t: i64) -> u32 {
        match t {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => UNDEFINED,
        }
    }
}

pub struct Vocab {
    texts: Vec<String>,
    scores: Vec<f32>,
    attrs: Vec<u32>,
    ids: HashMap<String, u32>,
    /// `<0xXX>` token of each byte (SPM byte fallback), or the byte itself as a token.
    byte_tokens: [Option<u32>; 256],
}

impl Vocab {
    /// Build from the token list and the optional parallel score and type lists.
    pub fn new(
        mut texts: Vec<String>,
        scores: Option<Vec<f32>>,
        types: Option<Vec<i64>>,
    ) -> Result<Vocab, TokenizerError> {
        let n = texts.len();
        if let Some(s) = &scores {
            if s.len() < n {
                return Err(TokenizerError::BadMetadata(format!(
                    "tokenizer.ggml.scores has {} entries for {n} tokens",
                    s.len()
                )));
            }
        }
        if let Some(t) = &types {
            if t.len() < n {
                return Err(TokenizerError::BadMetadata(format!(
                    "tokenizer.ggml.token_type has {} entries for {n} tokens",
                    t.len()
                )));
            }
        }
        let mut ids = HashMap::with_capacity(n);
        for (i, text) in texts.iter_mut().enumerate() {
            if text.is_empty() {
                // llama.cpp renames empty tokens so that they can never match.
                *text = format!("[EMPTY_{i}]");
            }
            if ids.insert(text.clone(), i as u32).is_some() {
                return Err(TokenizerError::BadMetadata(format!(
                    "token text {text:?} appears twice (second time at id {i})"
                )));
            }
        }
        let scores = scores.map(|mut s| {
            s.truncate(n);
            s
        });
        let attrs = match types {
            Some(t) => t[..n].iter().map(|&t| attr::from_token_type(t)).collect(),
            None => vec![attr::NORMAL; n],
        };
        let mut vocab = Vocab {
            scores: scores.unwrap_or_else(|| vec![0.0; n]),
            texts,
            attrs,
            ids,
            byte_tokens: [None; 256],
        };
        vocab.byte_tokens = std::array::from_fn(|b| {
            let hex = format!("<0x{b:02X}>");
            vocab.id_of(&hex).or_else(|| {
                let one = [b as u8];
                std::str::from_utf8(&one).ok().and_then(|s| vocab.id_of(s))
            })
        });
        Ok(vocab)
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn id_of(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    pub fn text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).map(|s| s.as_str())
    }

    pub fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    pub fn attr(&self, id: u32) -> u32 {
        self.attrs
            .get(id as usize)
            .copied()
            .unwrap_or(attr::UNDEFINED)
    }

    pub fn has_attr(&self, id: u32, a: u32) -> bool {
        self.attr(id) & a != 0
    }

    pub fn set_attr(&mut self, id: u32, value: u32) {
        if let Some(a) = self.attrs.get_mut(id as usize) {
            *a = value;
        }
    }

    pub fn add_attr(&mut self, id: u32, a: u32) {
        if let Some(x) = self.attrs.get_mut(id as usize) {
            *x |= a;
        }
    }

    pub fn byte_token(&self, b: u8) -> Option<u32> {
        self.byte_tokens[b as usize]
    }

    /// The byte a `<0xXX>` byte token stands for.
    pub fn token_byte(&self, id: u32) -> Option<u8> {
        let text = self.text(id)?;
        u8::from_str_radix(text.get(3..5)?, 16).ok()
    }

    /// Ids of the given texts that exist in this vocabulary, in id order.
    pub fn ids_of_texts(&self, texts: &[&str]) -> Vec<u32> {
        let mut v: Vec<u32> = texts.iter().filter_map(|t| self.id_of(t)).collect();
        v.sort_unstable();
        v
    }
}
