//! `scale.wgsl`: `y = x * s`.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScaleParams {
    pub n: u32,
    pub s: f32,
}
const _: () = assert!(size_of::<ScaleParams>() == wgsl_params::SCALE);

/// Over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    s: f32,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = ScaleParams { n: n as u32, s };
    per_element(rec, "scale.wgsl", params, &[x], y, n)
}
