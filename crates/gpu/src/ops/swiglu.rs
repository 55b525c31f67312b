//! `swiglu.wgsl`: `y = silu(gate) * up`.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SwigluParams {
    pub n: u32,
}
const _: () = assert!(size_of::<SwigluParams>() == wgsl_params::SWIGLU);

/// Over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    gate: &T::Buffer,
    up: &T::Buffer,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = SwigluParams { n: n as u32 };
    per_element(rec, "swiglu.wgsl", params, &[gate, up], y, n)
}
