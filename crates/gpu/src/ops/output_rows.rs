//! `output_rows.wgsl`: keeps the rows outputs were asked for.

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct OutputRowsParams {
    /// Row length (elements).
    pub k: u32,
    pub n_tokens: u32,
}
const _: () = assert!(size_of::<OutputRowsParams>() == wgsl_params::OUTPUT_ROWS);

/// `y[r] = x[output_rows[r]]`, rows of `width`.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    step: &T::Buffer,
    x: &T::Buffer,
    y: &T::Buffer,
    width: usize,
    n_tokens: usize,
    n_outputs: usize,
) -> Result<(), GpuError> {
    let key = PipelineKey {
        family: "output_rows.wgsl",
        entry: "main",
        defines: vec![],
    };
    let params = OutputRowsParams {
        k: width as u32,
        n_tokens: n_tokens as u32,
    };
    rec.dispatch(
        key,
        params,
        vec![(1, step.clone()), (2, x.clone()), (3, y.clone())],
        [width.div_ceil(64) as u32, n_outputs as u32, 1],
    )
}
