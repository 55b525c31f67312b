//! Activation rounding before matmuls (`quantize.wgsl`), the way ggml's CPU backend quantizes
//! activations for each weight type's vec_dot (so the GPU computes llama.cpp's numbers).

use tessera_gguf::GgmlType;

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

/// How activations are rounded for a weight type: the define and the block size.
pub fn act_rounding(w_ty: GgmlType) -> Option<(&'static str, usize)> {
    match w_ty {
        // MXFP4's vec_dot_type is Q8_0 too (gpt-oss's experts).
        GgmlType::Q4_0
        | GgmlType::Q5_0
        | GgmlType::Q8_0
        | GgmlType::Q4_1
        | GgmlType::Q5_1
        | GgmlType::MXFP4 => Some(("ACT_Q8_0", 32)),
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => Some(("ACT_Q8_K", 256)),
        GgmlType::F16 => Some(("ACT_F16", 4)),
        _ => None,
    }
}

/// `quantize.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QuantizeParams {
    /// Elements (a multiple of the block size).
    pub n: u32,
}
const _: () = assert!(size_of::<QuantizeParams>() == wgsl_params::QUANTIZE);

/// `y = round(x)` over `n` floats (`n` a multiple of the block size); `packed`: the 8-bit
/// integers packed with each 32-element chunk's scale and sum (`mul_mat_q8`'s input, `PACK`;
/// Q8_0 and Q8_K only).
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    define: &'static str,
    block: usize,
    packed: bool,
    x: &T::Buffer,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    if !n.is_multiple_of(block) {
        return Err(GpuError::Unsupported(format!(
            "{define} over {n} elements (blocks of {block})"
        )));
    }
    if packed && !n.is_multiple_of(32) {
        return Err(GpuError::Unsupported(format!(
            "packing {n} activations (chunks of 32)"
        )));
    }
    let mut defines = vec![(define, 1)];
    if packed {
        defines.push(("PACK", 1));
    }
    let key = PipelineKey {
        family: "quantize.wgsl",
        entry: "main",
        defines,
    };
    let groups = rec.grid((n / block).div_ceil(64), 1)?;
    rec.dispatch(
        key,
        QuantizeParams { n: n as u32 },
        vec![(1, x.clone()), (3, y.clone())],
        groups,
    )
}
