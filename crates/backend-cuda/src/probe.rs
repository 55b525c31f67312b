//! What CUDA offers on this machine (`tessera devices`, the CLI's `--backend cuda`): the
//! driver, its devices and whether NVRTC (the kernel compiler) is there. Never panics: with
//! no driver the answer is [`CudaError::NoDriver`].

use cudarc::driver::result;
use cudarc::driver::sys::CUdevice_attribute as Attr;

use crate::error::CudaError;
use crate::libs;

/// One CUDA device as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// Compute capability (major, minor): 9.0 for an H100/H200.
    pub compute_capability: (i32, i32),
    pub total_mem: usize,
    pub multiprocessors: i32,
}

impl DeviceInfo {
    /// The NVRTC virtual architecture kernels are compiled for (`compute_90`).
    pub fn arch(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("compute_{major}{minor}")
    }

    pub fn describe(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!(
            "{} (compute {major}.{minor}, {:.1} GiB, {} SMs)",
            self.name,
            self.total_mem as f64 / (1u64 << 30) as f64,
            self.multiprocessors
        )
    }
}

/// The driver's CUDA version as (major, minor), e.g. (12, 8).
pub fn driver_version() -> Result<(i32, i32), CudaError> {
    init()?;
    let mut v = 0;
    // SAFETY: the driver is loaded and initialised (`init`); `v` outlives the call.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) }.result()?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// Every CUDA device, in the driver's order (an error, never a panic, without a driver).
pub fn devices() -> Result<Vec<DeviceInfo>, CudaError> {
    init()?;
    let n = result::device::get_count()?;
    (0..n.max(0) as usize).map(device).collect()
}

/// Device `ordinal`'s description.
pub fn device(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    init()?;
    let n = result::device::get_count()? as usize;
    if ordinal >= n {
        return Err(if n == 0 {
            CudaError::NoDevice
        } else {
            CudaError::BadOrdinal(ordinal)
        });
    }
    let dev = result::device::get(ordinal as i32)?;
    // SAFETY: `dev` was just returned by cuDeviceGet.
    let attr = |a| unsafe { result::device::get_attribute(dev, a) };
    Ok(DeviceInfo {
        ordinal,
        name: result::device::get_name(dev)?,
        compute_capability: (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        // SAFETY: as above.
        total_mem: unsafe { result::device::total_mem(dev) }?,
        multiprocessors: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
    })
}

/// Loads and initialises the driver once (cuInit may be called again: it is idempotent).
fn init() -> Result<(), CudaError> {
    libs::require_driver()?;
    result::init()?;
    Ok(())
}

/// Whether this machine can run the CUDA backend, in one line for `tessera devices`:
/// the devices, or why there are none.
pub fn summary() -> Result<Vec<DeviceInfo>, CudaError> {
    let devices = devices()?;
    if devices.is_empty() {
        return Err(CudaError::NoDevice);
    }
    libs::require_nvrtc()?;
    Ok(devices)
}
