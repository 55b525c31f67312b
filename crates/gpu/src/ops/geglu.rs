//! `geglu.wgsl`: `y = gelu_tanh(gate) * up`, with ggml's f16 rounding of GELU.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GegluParams {
    pub n: u32,
}
const _: () = assert!(size_of::<GegluParams>() == wgsl_params::GEGLU);

/// Over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    gate: &T::Buffer,
    up: &T::Buffer,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = GegluParams { n: n as u32 };
    per_element(rec, "geglu.wgsl", params, &[gate, up], y, n)
}
