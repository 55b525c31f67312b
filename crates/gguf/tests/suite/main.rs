//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short).

mod common;
mod alloc_bound;
mod hostile;
mod python_gguf;
mod real_models;
mod roundtrip;
mod split;
mod stream;
