//! Rotary embedding (`rope.wgsl`), positions from the step buffer.

use tessera_core::graph::{RopeMode, RopeParams};

use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::{Params, Recorder};

pub fn mode_index(mode: RopeMode) -> usize {
    match mode {
        RopeMode::Normal => 0,
        RopeMode::Neox => 1,
    }
}

/// `x` is `[head_dim, n_heads, n_tokens]`.
#[allow(clippy::too_many_arguments)]
pub fn record(
    rec: &mut Recorder,
    step: &wgpu::Buffer,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    head_dim: usize,
    n_heads: usize,
    n_tokens: usize,
    p: &RopeParams,
) -> Result<(), WgpuError> {
    if p.n_dims > head_dim || p.n_dims % 2 != 0 {
        return Err(WgpuError::Unsupported(format!(
            "rope of {} dims in heads of {head_dim}",
            p.n_dims
        )));
    }
    let key = PipelineKey {
        family: "rope.wgsl",
        entry: "main",
        defines: vec![],
    };
    let params = Params::new()
        .u(head_dim)
        .u(n_heads)
        .u(n_tokens)
        .u(p.n_dims)
        .u(mode_index(p.mode))
        .f(p.freq_base)
        .f(p.freq_scale)
        .f(p.theta_scale());
    let groups = rec.grid((head_dim * n_heads * n_tokens).div_ceil(64), 1)?;
    rec.dispatch(
        key,
        params,
        vec![(1, step.clone()), (2, x.clone()), (3, y.clone())],
        groups,
    )
}
