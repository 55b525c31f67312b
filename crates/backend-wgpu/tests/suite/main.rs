#![cfg(not(target_arch = "wasm32"))]
//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short).

mod async_read_back;
mod batch_independence;
mod device_errors;
mod models;
mod sampling;
mod synth;
mod under_test;
mod weight_stream;
