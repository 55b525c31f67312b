//! rms_norm (`rms_norm.wgsl`).

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

/// `rms_norm.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsNormParams {
    pub width: u32,
    pub rows: u32,
    pub eps: f32,
}
const _: () = assert!(size_of::<RmsNormParams>() == wgsl_params::RMS_NORM);

/// Each of `rows` rows of `width` floats divided by its root mean square.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    y: &T::Buffer,
    width: usize,
    rows: usize,
    eps: f32,
) -> Result<(), GpuError> {
    let key = PipelineKey {
        family: "rms_norm.wgsl",
        entry: "main",
        defines: match rec.gpu.subgroup_kernels() {
            true => vec![("SUBGROUPS", 1)],
            false => vec![],
        },
    };
    let groups = rec.grid(rows, 1)?;
    rec.dispatch(
        key,
        RmsNormParams {
            width: width as u32,
            rows: rows as u32,
            eps,
        },
        vec![(1, x.clone()), (3, y.clone())],
        groups,
    )
}
