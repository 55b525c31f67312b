//! `swiglu_oai.wgsl`: gpt-oss's clamped SwiGLU.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SwigluOaiParams {
    pub n: u32,
    pub alpha: f32,
    pub limit: f32,
}
const _: () = assert!(size_of::<SwigluOaiParams>() == wgsl_params::SWIGLU_OAI);

/// Over `n` floats.
#[allow(clippy::too_many_arguments)]
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    gate: &T::Buffer,
    up: &T::Buffer,
    alpha: f32,
    limit: f32,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = SwigluOaiParams {
        n: n as u32,
        alpha,
        limit,
    };
    per_element(rec, "swiglu_oai.wgsl", params, &[gate, up], y, n)
}
