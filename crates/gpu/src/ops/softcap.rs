//! `softcap.wgsl`: `y = cap * tanh(x / cap)`.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SoftcapParams {
    pub n: u32,
    pub cap: f32,
}
const _: () = assert!(size_of::<SoftcapParams>() == wgsl_params::SOFTCAP);

/// Over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    cap: f32,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = SoftcapParams { n: n as u32, cap };
    per_element(rec, "softcap.wgsl", params, &[x], y, n)
}
