//! `add.wgsl`: `y = a + b`.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AddParams {
    pub n: u32,
}
const _: () = assert!(size_of::<AddParams>() == wgsl_params::ADD);

/// Over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    a: &T::Buffer,
    b: &T::Buffer,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = AddParams { n: n as u32 };
    per_element(rec, "add.wgsl", params, &[a, b], y, n)
}
