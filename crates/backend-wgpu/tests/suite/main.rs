#![cfg(not(target_arch = "wasm32"))]
//! The crate's integration tests, one binary (each test binary links the whole dependency
//! tree, so one binary per crate keeps the suite's build short). The model tests are the GPU
//! backends' (`tessera_conformance::models`), run on this backend (`under_test`).

mod async_read_back;
mod batch_independence;
mod device_errors;
mod sampling;
mod under_test;
mod weight_stream;

mod models {
    tessera_conformance::gpu_model_tests!(crate::under_test::model_backend);
}

mod synth {
    tessera_conformance::gpu_synth_tests!(crate::under_test::model_backend);
}
