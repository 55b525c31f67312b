//! `y = x · wᵀ` with packed integer dot products (`mul_mat_q8.wgsl`): the activations
//! quantized to 8 bits and packed by `quantize` (`PACK`), the weights read as integers and
//! summed in ggml's x86 arithmetic (the CPU backend's), one dispatch per weight part. Devices with `shaderIntegerDotProduct` where the backend turns
//! it on (`Target::int_dot_kernels`), for the types of
//! `tessera_kernels::variants::INT_DOT_TYPES`; the rest take `mul_mat`.

use tessera_gguf::GgmlType;
use tessera_kernels::variants::{mul_mat::WG, INT_DOT_SHAPES, INT_DOT_TYPES};

use crate::error::GpuError;
use crate::ops::mul_mat::{dispatch_parts, MulMatParams};
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;
use crate::weights::{alignment_define, type_define, GpuWeight};

const _: () = assert!(size_of::<MulMatParams>() == wgsl_params::MUL_MAT_Q8);

/// Weights at least this tall take 4 rows per invocation in decode (the output projection):
/// as `mul_mat`'s CPU_ROWS, each activation chunk then serves several rows; smaller ones one
/// row per invocation, for more invocations over the CPU's threads. Batches take one row and
/// 8 columns (`INT_DOT_SHAPES`).
const TALL: usize = 16384;

/// The activations' quantization (`quantize.wgsl` define, block) of weights of type `ty` on
/// the integer path, if it reads them.
pub fn int_dot_rounding(ty: GgmlType) -> Option<(&'static str, usize)> {
    let define = type_define(ty)?;
    let (_, act) = INT_DOT_TYPES.iter().find(|(t, _)| *t == define)?;
    Some((act, if *act == "ACT_Q8_K" { 256 } else { 32 }))
}

/// `x` (packed by `quantize` with `PACK`) is `[k, n]`, `y` is `[w.n_rows, n]`.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    w: &GpuWeight<T::Buffer>,
    x: &T::Buffer,
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let ty_define = type_define(w.ty)
        .filter(|_| int_dot_rounding(w.ty).is_some())
        .ok_or_else(|| GpuError::UnsupportedType {
            name: "integer-dot matmul weight".into(),
            ty: w.ty,
        })?;
    if w.k % 32 != 0 {
        return Err(GpuError::Unsupported(format!(
            "integer-dot matmul with rows of {} elements (needs a multiple of 32)",
            w.k
        )));
    }
    let (nr, nc) = match (n, w.n_rows >= TALL) {
        (1, false) => INT_DOT_SHAPES[0],
        (1, true) => INT_DOT_SHAPES[1],
        _ => INT_DOT_SHAPES[2],
    };
    let mut defines = vec![(ty_define, 1), ("WG", WG), ("NR", nr), ("NC", nc)];
    defines.extend(alignment_define(rec.gpu, w));
    if rec.gpu.exact_fma_kernels() {
        defines.push(("EXACT_FMA", 1));
    }
    let key = PipelineKey {
        family: "mul_mat_q8.wgsl",
        entry: "main",
        defines,
    };
    dispatch_parts(rec, w, key, x, y, n, (WG * nr) as usize, nc as usize)
}
