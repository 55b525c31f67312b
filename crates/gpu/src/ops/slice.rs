//! `slice.wgsl`: elements `offset .. offset + len` of every row of `x` (rows of `width`).

use super::{per_element, u32_of};
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SliceParams {
    pub n: u32,
    pub len: u32,
    pub width: u32,
    pub offset: u32,
}
const _: () = assert!(size_of::<SliceParams>() == wgsl_params::SLICE);

/// `n` output floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    width: usize,
    offset: usize,
    len: usize,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let params = SliceParams {
        n: u32_of("slice elements", n)? as u32,
        len: len as u32,
        width: u32_of("slice row width", width)? as u32,
        offset: offset as u32,
    };
    per_element(rec, "slice.wgsl", params, &[x], y, n)
}
