//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short).

mod alloc_bound;
mod common;
mod hostile;
mod python_gguf;
mod real_models;
mod roundtrip;
mod split;
mod stream;
