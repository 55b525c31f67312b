//! The Vulkan backend's integration tests (one binary, one module per topic). They need a
//! Vulkan loader and device: lavapipe (`mesa-vulkan-drivers`) in CI. The model tests are the
//! GPU backends' (`tessera_conformance::models`), run on this backend (`under_test`).

mod against_cpu;
mod device_errors;
mod devices;
mod int_dot;
mod prebuilt;
mod subgroups;
mod under_test;

mod models {
    tessera_conformance::gpu_model_tests!(crate::under_test::model_backend);
}

mod synth {
    tessera_conformance::gpu_synth_tests!(crate::under_test::model_backend);
}
