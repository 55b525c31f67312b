//! Row gathers (`rows.wgsl`): embedding lookup and the output-row selection.

use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::{Params, Recorder};
use crate::weights::{alignment_define, type_define, GpuWeight};

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
        let params = Params::new()
            .u(table.k)
            .u(part.rows)
            .u(part.row0)
            .u(table.row_bytes)
            .u(n_tokens);
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
    let params = Params::new().u(width).u(0).u(0).u(0).u(n_tokens);
    rec.dispatch(
        key,
        params,
        vec![(1, step.clone()), (2, x.clone()), (3, y.clone())],
        [width.div_ceil(64) as u32, n_outputs as u32, 1],
    )
}
