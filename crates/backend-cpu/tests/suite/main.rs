#![cfg(not(target_arch = "wasm32"))]
//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short).

mod attention_kernel;
mod batch_independence;
mod fidelity_gemma3;
mod fidelity_smollm2;
mod fidelity_synth;
mod multi_sequence;
mod plan_reuse;
