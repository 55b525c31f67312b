//! Sampling on the GPU: greedy (`sample.wgsl`, one token id per logits row) and the engine's
//! whole chain on one row (`sample_chain.wgsl`).

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

/// `sample.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ArgmaxParams {
    pub width: u32,
    pub rows: u32,
}
const _: () = assert!(size_of::<ArgmaxParams>() == wgsl_params::SAMPLE);

/// `sample_chain.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SampleChainParams {
    pub width: u32,
    /// The logits row sampled.
    pub row: u32,
}
const _: () = assert!(size_of::<SampleChainParams>() == wgsl_params::SAMPLE_CHAIN);

/// The greedy token of each of `rows` rows of `logits` (`width` wide) into `ids`.
pub fn argmax<T: Target>(
    rec: &mut Recorder<T>,
    logits: &T::Buffer,
    ids: &T::Buffer,
    width: usize,
    rows: usize,
) -> Result<(), GpuError> {
    let key = PipelineKey {
        family: "sample.wgsl",
        entry: "argmax",
        defines: vec![],
    };
    rec.dispatch(
        key,
        ArgmaxParams {
            width: width as u32,
            rows: rows as u32,
        },
        vec![(1, logits.clone()), (3, ids.clone())],
        [rows as u32, 1, 1],
    )
}

// The spec a GPU sampling chain reads (shared with the CUDA backend's `sample_chain`).
pub use tessera_core::sampling::{SPEC_EDITS, SPEC_HEADER};

/// The spec words of one sampling step, or `None` when it has more edits than [`SPEC_EDITS`].
pub fn spec_words(step: &tessera_core::sampling::DeviceSampling) -> Option<Vec<u32>> {
    step.spec_words()
}

/// The engine's sampling chain on row `row` of `logits` (`width` wide): writes (status, token)
/// to `result` (see `sample_chain.wgsl`); `work` holds 3 × `width` words.
pub fn sample_chain<T: Target>(
    rec: &mut Recorder<T>,
    logits: &T::Buffer,
    spec: &T::Buffer,
    result: &T::Buffer,
    work: &T::Buffer,
    width: usize,
    row: usize,
) -> Result<(), GpuError> {
    let key = PipelineKey {
        family: "sample_chain.wgsl",
        entry: "sample",
        defines: vec![],
    };
    rec.dispatch(
        key,
        SampleChainParams {
            width: width as u32,
            row: row as u32,
        },
        vec![
            (1, logits.clone()),
            (2, spec.clone()),
            (3, result.clone()),
            (4, work.clone()),
        ],
        [1, 1, 1],
    )
}
