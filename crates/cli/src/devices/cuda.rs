//! The CUDA section of `tessera devices`: the driver, NVRTC and each device, or why there is
//! none ("CUDA: no driver"). Never fails: a missing piece is a line of the listing.

use tessera_backend_cuda::{kernels, probe, CudaError};

/// The section's lines: the driver and NVRTC, then one line per device.
pub fn lines() -> Vec<String> {
    let devices = match probe::devices() {
        Ok(d) => d,
        Err(CudaError::NoDriver) => return vec!["CUDA: no driver".into()],
        Err(e) => {
            return vec![format!(
                "CUDA: {}",
                e.to_string().trim_start_matches("CUDA: ")
            )]
        }
    };
    let driver = probe::driver_version()
        .map(|(major, minor)| format!("driver {major}.{minor}"))
        .unwrap_or_else(|e| e.to_string());
    let nvrtc = kernels::nvrtc_version()
        .map(|(major, minor)| format!("NVRTC {major}.{minor}"))
        .unwrap_or_else(|_| "no NVRTC: kernels cannot be compiled".into());
    let mut lines = vec![format!("CUDA: {driver}, {nvrtc}")];
    if devices.is_empty() {
        lines.push("no devices".into());
    }
    for d in devices {
        lines.push(format!("{}: {}", d.ordinal, d.describe()));
    }
    lines
}
