//! The Vulkan backend's integration tests (one binary, one module per topic). They need a
//! Vulkan loader and device: lavapipe (`mesa-vulkan-drivers`) in CI. The model tests are the
//! WebGPU backend's (`backend-wgpu/tests/suite/{models,synth}.rs`), run on this backend.

mod against_cpu;
mod device_errors;
mod devices;
mod int_dot;
#[path = "../../../backend-wgpu/tests/suite/models.rs"]
mod models;
mod prebuilt;
mod subgroups;
#[path = "../../../backend-wgpu/tests/suite/synth.rs"]
mod synth;
mod under_test;
