//! The op conformance suite of the GPU backends (`backend-wgpu/tests/conformance/cases.rs`:
//! every op, every weight type the kernels read, MoE ops, attention variants), run on the
//! Vulkan backend against the CPU backend. The cases are the WebGPU backend's, unchanged;
//! only the device under test differs.

#[path = "../../backend-wgpu/tests/conformance/cases.rs"]
mod cases;
#[path = "conformance/vulkan.rs"]
mod under_test;
