//! `activation.wgsl`: a gateless feed-forward's activation.

use tessera_core::graph::Activation;

use super::per_element_with;
use crate::error::GpuError;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ActivationParams {
    pub n: u32,
}
const _: () = assert!(size_of::<ActivationParams>() == wgsl_params::ACTIVATION);

/// `y = act(x)` over `n` floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    x: &T::Buffer,
    act: Activation,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let define = match act {
        Activation::Silu => "ACT_SILU",
        Activation::Gelu => "ACT_GELU",
        Activation::Relu => "ACT_RELU",
    };
    let params = ActivationParams { n: n as u32 };
    per_element_with(
        rec,
        "activation.wgsl",
        vec![(define, 1)],
        params,
        &[x],
        y,
        n,
    )
}
