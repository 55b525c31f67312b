//! Sampling on the GPU: greedy (`sample.wgsl`, one token id per logits row) and the engine's
//! whole chain on one row (`sample_chain.wgsl`).

use crate::error::WgpuError;
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
) -> Result<(), WgpuError> {
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

/// Words of the sampling spec before its edits (`sample_chain.wgsl`).
pub const SPEC_HEADER: usize = 10;
/// Logit edits (bias entries plus penalized tokens) a spec holds; a step with more is sampled
/// on the CPU.
pub const SPEC_EDITS: usize = 1024;

/// The spec words of one sampling step, or `None` when it has more edits than [`SPEC_EDITS`].
pub fn spec_words(step: &tessera_core::sampling::DeviceSampling) -> Option<Vec<u32>> {
    let p = &step.params;
    let counts: &[(u32, u32)] = if step.penalties_active() {
        &step.counts
    } else {
        &[]
    };
    if p.logit_bias.len() + counts.len() > SPEC_EDITS {
        return None;
    }
    // f32 of a draw just under 1 can round to 1.0, past every cumulative sum.
    let u = (step.u as f32).min(1.0 - f32::EPSILON);
    let mut w = vec![
        p.top_k.max(0) as u32,
        p.top_p.to_bits(),
        p.min_p.to_bits(),
        p.temperature.to_bits(),
        u.to_bits(),
        p.repeat_penalty.to_bits(),
        p.frequency_penalty.to_bits(),
        p.presence_penalty.to_bits(),
        p.logit_bias.len() as u32,
        counts.len() as u32,
    ];
    for &(t, b) in &p.logit_bias {
        w.extend([t, b.to_bits()]);
    }
    for &(t, c) in counts {
        w.extend([t, c]);
    }
    Some(w)
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
) -> Result<(), WgpuError> {
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

/// The token `sample_chain.wgsl` wrote as (status, token): 0 a token, 1 every logit masked,
/// else a NaN logit at `token`.
pub fn chain_outcome(
    [status, token]: [u32; 2],
) -> Result<u32, tessera_core::sampling::SamplingError> {
    use tessera_core::sampling::SamplingError;
    match status {
        0 => Ok(token),
        1 => Err(SamplingError::AllMasked),
        _ => Err(SamplingError::NanLogit { token }),
    }
}
