//! rms_norm (`norm.wgsl`).

use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;

/// `norm.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NormParams {
    pub width: u32,
    pub rows: u32,
    pub eps: f32,
}
const _: () = assert!(size_of::<NormParams>() == wgsl_params::NORM);

/// Each of `rows` rows of `width` floats divided by its root mean square.
pub fn rms_norm(
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    width: usize,
    rows: usize,
    eps: f32,
) -> Result<(), WgpuError> {
    let key = PipelineKey {
        family: "norm.wgsl",
        entry: "main",
        defines: vec![],
    };
    let groups = rec.grid(rows, 1)?;
    rec.dispatch(
        key,
        NormParams {
            width: width as u32,
            rows: rows as u32,
            eps,
        },
        vec![(1, x.clone()), (3, y.clone())],
        groups,
    )
}
