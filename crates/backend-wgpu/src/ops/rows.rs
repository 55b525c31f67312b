//! Row gathers (`rows.wgsl`): embedding lookup and the output-row selection.

use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::weights::{alignment_define, type_define, GpuWeight};

/// `rows.wgsl`'s parameters; `output_rows` reads `k` and `n_tokens`.
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RowsParams {
    /// Row length (elements).
    pub k: u32,
    /// Table rows in this binding.
    pub rows: u32,
    /// First table row of this binding.
    pub row0: u32,
    pub row_bytes: u32,
    pub n_tokens: u32,
}
const _: () = assert!(size_of::<RowsParams>() == wgsl_params::ROWS);

/// `y[t] = dequantize(table row tokens[t])` for the step's `n_tokens` tokens.
pub fn get_rows(
    rec: &mut Recorder,
    table: &GpuWeight,
    step: &wgpu::Buffer,
    y: &wgpu::Buffer,
    n_tokens: usize,
) -> Result<(), WgpuError> {
    let ty_define = type_define(table.ty).ok_or_else(|| WgpuError::UnsupportedType {
        name: "embedding table".into(),
        ty: table.ty,
    })?;
    for part in &table.parts {
        let key = PipelineKey {
            family: "rows.wgsl",
            entry: "get_rows",
            defines: [("GET_ROWS", 1), (ty_define, 1)]
                .into_iter()
                .chain(alignment_define(rec.gpu, table))
                .collect(),
        };
        let params = RowsParams {
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

/// `y[r] = x[output_rows[r]]`, rows of `width`.
pub fn output_rows(
    rec: &mut Recorder,
    step: &wgpu::Buffer,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    width: usize,
    n_tokens: usize,
    n_outputs: usize,
) -> Result<(), WgpuError> {
    let key = PipelineKey {
        family: "rows.wgsl",
        entry: "output_rows",
        defines: vec![("OUTPUT_ROWS", 1)],
    };
    let params = RowsParams {
        k: width as u32,
        n_tokens: n_tokens as u32,
        ..RowsParams::default()
    };
    rec.dispatch(
        key,
        params,
        vec![(1, step.clone()), (2, x.clone()), (3, y.clone())],
        [width.div_ceil(64) as u32, n_outputs as u32, 1],
    )
}
