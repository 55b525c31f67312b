//! Rotary embedding (`rope.wgsl`), positions from the step buffer.

use tessera_core::graph::{RopeMode, RopeParams};

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

pub fn mode_index(mode: RopeMode) -> u32 {
    match mode {
        RopeMode::Normal => 0,
        RopeMode::Neox => 1,
    }
}

/// `rope.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RopeKernelParams {
    pub head_dim: u32,
    pub n_heads: u32,
    pub n_tokens: u32,
    pub n_dims: u32,
    /// [`mode_index`].
    pub mode: u32,
    pub freq_base: f32,
    pub freq_scale: f32,
    /// `freq_base^(-2/n_dims)` by the host's powf.
    pub theta_scale: f32,
    /// [`RopeParams::mscale`].
    pub attn_factor: f32,
    pub ext_factor: f32,
    pub corr0: f32,
    pub corr1: f32,
}
const _: () = assert!(size_of::<RopeKernelParams>() == wgsl_params::ROPE);

/// `x` is `[head_dim, n_heads, n_tokens]`; `factors` holds `p`'s frequency factors.
#[allow(clippy::too_many_arguments)]
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    step: &T::Buffer,
    x: &T::Buffer,
    y: &T::Buffer,
    head_dim: usize,
    n_heads: usize,
    n_tokens: usize,
    p: &RopeParams,
    factors: Option<&T::Buffer>,
) -> Result<(), GpuError> {
    if p.n_dims > head_dim || !p.n_dims.is_multiple_of(2) {
        return Err(GpuError::Unsupported(format!(
            "rope of {} dims in heads of {head_dim}",
            p.n_dims
        )));
    }
    let mut buffers = vec![(1, step.clone()), (2, x.clone()), (3, y.clone())];
    let mut defines = vec![];
    if let Some(f) = factors {
        defines.push(("FREQ_FACTORS", 1));
        buffers.push((4, f.clone()));
    }
    let key = PipelineKey {
        family: "rope.wgsl",
        entry: "main",
        defines,
    };
    let params = RopeKernelParams {
        head_dim: head_dim as u32,
        n_heads: n_heads as u32,
        n_tokens: n_tokens as u32,
        n_dims: p.n_dims as u32,
        mode: mode_index(p.mode),
        freq_base: p.freq_base,
        freq_scale: p.freq_scale,
        theta_scale: p.theta_scale(),
        attn_factor: p.mscale(),
        ext_factor: p.yarn.map_or(0.0, |y| y.ext_factor),
        corr0: p.yarn.map_or(0.0, |y| y.corr_dims[0]),
        corr1: p.yarn.map_or(0.0, |y| y.corr_dims[1]),
    };
    let groups = rec.grid((head_dim * n_heads * n_tokens).div_ceil(64), 1)?;
    rec.dispatch(key, params, buffers, groups)
}
