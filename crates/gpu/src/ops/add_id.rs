//! `add_id.wgsl`: each chosen expert's bias added to its output.

use super::{per_element, u32_of};
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AddIdParams {
    pub n: u32,
    pub m: u32,
    pub n_used: u32,
}
const _: () = assert!(size_of::<AddIdParams>() == wgsl_params::ADD_ID);

/// `x` `[m, n_used, T]` plus the biases `[m, n_expert]` of the experts in `route` → `y`
/// (`n` = m · n_used · T floats).
#[allow(clippy::too_many_arguments)]
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    bias: &T::Buffer,
    route: &T::Buffer,
    m: usize,
    n_used: usize,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = AddIdParams {
        n: u32_of("add_id elements", n)? as u32,
        m: m as u32,
        n_used: n_used as u32,
    };
    per_element(rec, "add_id.wgsl", params, &[x, bias, route], y, n)
}
