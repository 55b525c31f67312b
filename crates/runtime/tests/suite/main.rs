#![cfg(not(target_arch = "wasm32"))]
//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short).

mod chat_output;
mod chat_tokens;
mod constraint;
mod generate;
mod generation_steps;
mod nan_logits;
mod perplexity;
mod sampling;
mod shared_batch;
mod speculative_models;
mod speculative_parts;
mod structured_suite;
