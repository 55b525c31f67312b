#![cfg(not(target_arch = "wasm32"))]
//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short).

mod chat_template;
mod chat_template_limits;
mod llama_cpp_vocabularies;
mod text_spans;
mod tokenizer_decode;
mod tokenizer_fixtures;
