//! `moe_sum.wgsl`: the chosen experts' outputs weighted by the route and summed in order.

use super::{per_element, u32_of};
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeSumParams {
    pub n: u32,
    pub m: u32,
    pub n_used: u32,
}
const _: () = assert!(size_of::<MoeSumParams>() == wgsl_params::MOE_SUM);

/// `x` `[m, n_used, T]` and the route → `y` `[m, T]` (`n` = m · T floats).
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    route: &T::Buffer,
    m: usize,
    n_used: usize,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = MoeSumParams {
        n: u32_of("moe_sum elements", n)? as u32,
        m: m as u32,
        n_used: n_used as u32,
    };
    per_element(rec, "moe_sum.wgsl", params, &[x, route], y, n)
}
