//! `reglu.wgsl`: `y = relu(gate) * up`.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RegluParams {
    pub n: u32,
}
const _: () = assert!(size_of::<RegluParams>() == wgsl_params::REGLU);

/// Over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    gate: &T::Buffer,
    up: &T::Buffer,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = RegluParams { n: n as u32 };
    per_element(rec, "reglu.wgsl", params, &[gate, up], y, n)
}
