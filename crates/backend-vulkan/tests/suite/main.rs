//! The Vulkan backend's integration tests (one binary, one module per topic). They need a
//! Vulkan loader and device: lavapipe (`mesa-vulkan-drivers`) in CI.

mod devices;
