//! Greedy sampling on the GPU (`sample.wgsl`): one token id per logits row.

use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::{Params, Recorder};

pub fn argmax(
    rec: &mut Recorder,
    logits: &wgpu::Buffer,
    ids: &wgpu::Buffer,
    width: usize,
    rows: usize,
) -> Result<(), WgpuError> {
    let key = PipelineKey {
        family: "sample.wgsl",
        entry: "argmax",
        defines: vec![],
    };
    rec.dispatch(
        key,
        Params::new().u(width).u(rows),
        vec![(1, logits.clone()), (3, ids.clone())],
        [rows as u32, 1, 1],
    )
}
