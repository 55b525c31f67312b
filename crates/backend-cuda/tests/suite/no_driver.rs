//! Without a driver every entry point answers `CudaError::NoDriver`: no panic. On a machine
//! with one these tests check the other side (a device list) instead.

use tessera_backend_cuda::{libs, probe, CudaError};

#[test]
fn devices_answer_no_driver_or_a_list() {
    match probe::devices() {
        Err(CudaError::NoDriver) => assert!(!libs::driver_present()),
        Ok(list) => assert!(libs::driver_present(), "{list:?}"),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn no_driver_message_is_the_one_users_see() {
    if libs::driver_present() {
        eprintln!("skipped: this machine has a CUDA driver");
        return;
    }
    assert_eq!(
        CudaError::NoDriver.to_string(),
        "CUDA: no driver (libcuda.so.1 not found)"
    );
    assert!(matches!(probe::device(0), Err(CudaError::NoDriver)));
    assert!(matches!(probe::driver_version(), Err(CudaError::NoDriver)));
    assert!(matches!(probe::summary(), Err(CudaError::NoDriver)));
}
