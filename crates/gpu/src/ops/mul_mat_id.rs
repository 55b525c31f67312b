//! `mul_mat_id.wgsl`: the experts' matmul over the chosen experts only, one dispatch per
//! weight part (each computes the rows in its binding).

use crate::error::GpuError;
use crate::ops::u32_of;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;
use crate::weights::{alignment_define, type_define, GpuWeight};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MulMatIdParams {
    pub k: u32,
    /// Weight rows in this binding.
    pub rows: u32,
    /// First weight row of this binding.
    pub row0: u32,
    pub row_bytes: u32,
    /// Rows per expert.
    pub m: u32,
    pub n_used: u32,
    /// Tokens · n_used.
    pub n_slots: u32,
}
const _: () = assert!(size_of::<MulMatIdParams>() == wgsl_params::MUL_MAT_ID);

/// The shape of one expert matmul: `m` rows per expert, `n_used` experts for each of
/// `n_tokens` tokens, `shared_x`: one input row per token (else one per slot).
pub struct MulMatIdShape {
    pub m: usize,
    pub n_used: usize,
    pub n_tokens: usize,
    pub shared_x: bool,
}

/// `y[slot] = W[expert(slot)] · x[row(slot)]` (see [`MulMatIdShape`]).
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    w: &GpuWeight<T::Buffer>,
    x: &T::Buffer,
    route: &T::Buffer,
    y: &T::Buffer,
    s: &MulMatIdShape,
) -> Result<(), GpuError> {
    let ty_define = type_define(w.ty).ok_or_else(|| GpuError::UnsupportedType {
        name: "expert weight".into(),
        ty: w.ty,
    })?;
    if w.k % 4 != 0 {
        return Err(GpuError::Unsupported(format!(
            "expert matmul with rows of {} elements (needs a multiple of 4)",
            w.k
        )));
    }
    let n_slots = s.n_tokens * s.n_used;
    let n_out = u32_of("expert matmul outputs", n_slots * s.m)?;
    for part in &w.parts {
        u32_of("weight part bytes", part.rows * w.row_bytes)?;
        let mut defines = vec![(ty_define, 1)];
        defines.extend(alignment_define(rec.gpu, w));
        if s.shared_x {
            defines.push(("N_X_SHARED", 1));
        }
        let key = PipelineKey {
            family: "mul_mat_id.wgsl",
            entry: "main",
            defines,
        };
        let params = MulMatIdParams {
            k: w.k as u32,
            rows: part.rows as u32,
            row0: part.row0 as u32,
            row_bytes: w.row_bytes as u32,
            m: s.m as u32,
            n_used: s.n_used as u32,
            n_slots: n_slots as u32,
        };
        let groups = rec.grid(n_out.div_ceil(64), 1)?;
        let buffers = vec![
            (1, part.buffer.clone()),
            (2, x.clone()),
            (3, y.clone()),
            (4, route.clone()),
        ];
        rec.dispatch(key, params, buffers, groups)?;
    }
    Ok(())
}
