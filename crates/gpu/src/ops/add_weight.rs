//! `add_weight.wgsl`: `y = x + w`, `w` one f32 row (a bias) added to every row.

use super::per_element;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AddWeightParams {
    pub n: u32,
    /// Row width (the length of `w`).
    pub width: u32,
}
const _: () = assert!(size_of::<AddWeightParams>() == wgsl_params::ADD_WEIGHT);

/// Over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    w: &T::Buffer,
    width: usize,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = AddWeightParams {
        n: n as u32,
        width: width.max(1) as u32, // a modulus in the kernel
    };
    per_element(rec, "add_weight.wgsl", params, &[x, w], y, n)
}
