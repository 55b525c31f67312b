//! Tessera's tokenizers and chat templates, built from GGUF metadata and matching llama.cpp
//! token for token.
//!
//! - [`Tokenizer`]: byte-level BPE (`tokenizer.ggml.model = "gpt2"`, with the pre-tokenizer
//!   named by `tokenizer.ggml.pre`) and SentencePiece-style merges (`"llama"`).
//! - [`StreamDecoder`]: generated ids to text, never half a UTF-8 character.
//! - [`chat_template`]: the model's Jinja chat template (minijinja).

pub mod chat_template;
mod tokenizer;

pub use chat_template::{ChatMessage, ChatTemplate, ChatTemplateError};
pub use tokenizer::{attr, pretokenize, unicode, StreamDecoder, Tokenizer, TokenizerError};
