//! rms_norm (`norm.wgsl`).

use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::{Params, Recorder};

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
        Params::new().u(width).u(rows).f(eps),
        vec![(1, x.clone()), (3, y.clone())],
        groups,
    )
}
