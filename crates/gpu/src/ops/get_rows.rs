//! `get_rows.wgsl`: the embedding lookup, dequantizing the step's token rows.

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;
use crate::weights::{alignment_define, type_define, GpuWeight};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GetRowsParams {
    /// Row length (elements).
    pub k: u32,
    /// Table rows in this binding.
    pub rows: u32,
    /// First table row of this binding.
    pub row0: u32,
    pub row_bytes: u32,
    pub n_tokens: u32,
}
const _: () = assert!(size_of::<GetRowsParams>() == wgsl_params::GET_ROWS);

/// `y[t] = dequantize(table row tokens[t])` for the step's `n_tokens` tokens.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    table: &GpuWeight<T::Buffer>,
    step: &T::Buffer,
    y: &T::Buffer,
    n_tokens: usize,
) -> Result<(), GpuError> {
    let ty_define = type_define(table.ty).ok_or_else(|| GpuError::UnsupportedType {
        name: "embedding table".into(),
        ty: table.ty,
    })?;
    for part in &table.parts {
        let key = PipelineKey {
            family: "get_rows.wgsl",
            entry: "main",
            defines: std::iter::once((ty_define, 1))
                .chain(alignment_define(rec.gpu, table))
                .collect(),
        };
        let params = GetRowsParams {
            k: table.k as u32,
            rows: part.rows as u32,
            row0: part.row0 as u32,
            row_bytes: table.row_bytes as u32,
            n_tokens: n_tokens as u32,
        };
        let groups = [table.k.div_ceil(32).div_ceil(64) as u32, n_tokens as u32, 1];
        rec.dispatch(
            key,
            params,
            vec![(1, step.clone()), (2, part.buffer.clone()), (3, y.clone())],
            groups,
        )?;
    }
    Ok(())
}
