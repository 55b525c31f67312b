//! `moe_route.wgsl`: a mixture-of-experts router, one invocation per token.

use tessera_core::graph::{Gating, MoeRouteParams};

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

/// The most experts per token the kernel keeps (`MAX_USED` in the WGSL).
const MAX_USED: usize = 32;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeRouteKernelParams {
    pub n_expert: u32,
    pub n_used: u32,
    pub n_tokens: u32,
    pub scale: f32,
}
const _: () = assert!(size_of::<MoeRouteKernelParams>() == wgsl_params::MOE_ROUTE);

/// `logits` `[n_expert, n_tokens]` → `y` `[2 · n_used, n_tokens]`; `bias` holds the
/// selection bias where `p` has one.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    logits: &T::Buffer,
    bias: Option<&T::Buffer>,
    y: &T::Buffer,
    n_expert: usize,
    n_tokens: usize,
    p: &MoeRouteParams,
) -> Result<(), GpuError> {
    if p.n_used > MAX_USED {
        return Err(GpuError::Unsupported(format!(
            "{} experts per token (the router keeps up to {MAX_USED})",
            p.n_used
        )));
    }
    let mut defines = vec![match p.gating {
        Gating::Softmax => ("GATING_SOFTMAX", 1),
        Gating::Sigmoid => ("GATING_SIGMOID", 1),
        Gating::SoftmaxAfterTopK => ("DELAYED_SOFTMAX", 1),
    }];
    if p.normalize {
        defines.push(("NORMALIZE", 1));
    }
    let mut buffers = vec![(1, logits.clone()), (3, y.clone())];
    if let Some(b) = bias {
        defines.push(("SELECTION_BIAS", 1));
        buffers.push((2, b.clone()));
    }
    let key = PipelineKey {
        family: "moe_route.wgsl",
        entry: "main",
        defines,
    };
    let params = MoeRouteKernelParams {
        n_expert: n_expert as u32,
        n_used: p.n_used as u32,
        n_tokens: n_tokens as u32,
        scale: if p.scale != 0.0 { p.scale } else { 1.0 },
    };
    let groups = rec.grid(n_tokens.div_ceil(64), 1)?;
    rec.dispatch(key, params, buffers, groups)
}
