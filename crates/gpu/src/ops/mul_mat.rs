//! `y = x · wᵀ` straight from the GGUF blocks (`mul_mat.wgsl`), one dispatch per weight part.

use crate::error::GpuError;
use crate::ops::u32_of;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;
use crate::weights::{alignment_define, type_define, GpuWeight};

// The shapes below come from `tessera_kernels::variants::mul_mat` (the closed list of
// variants the Vulkan backend prebuilds); why they are what they are:
//
// BATCH_COLUMNS: columns per workgroup for batches on GPUs: each dequantized chunk of weights
// is reused this often.
//
// CPU_ROWS: weight rows per invocation on CPU adapters for very tall weights (the output
// projection) in decode: each gathered activation chunk serves this many (on lavapipe the
// time fell with every doubling up to 16). Decoding through the small weights keeps one row per invocation (more
// invocations to spread over the CPU's threads). The decode kernel is written out for 1 or 8
// rows and the batch kernel (`TILE`) for `TILE_ROWS` × `TILE_COLUMNS`, or
// `WIDE_TILE_COLUMNS` (`TILE_WIDE`) for the tall weights: these constants must match the WGSL.
// The wide tile reads a tall weight half as often, which pays on lavapipe (SwiftShader is
// indifferent to it).
use tessera_kernels::variants::mul_mat::{
    BATCH_COLUMNS, CPU_ROWS, TILE_COLUMNS, WG, WG_SHORT, WIDE_TILE_COLUMNS,
};
const TILE_ROWS: u32 = 4;
const TALL: usize = 16384;

/// `mul_mat.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MulMatParams {
    /// Row length (elements).
    pub k: u32,
    /// Weight rows in this binding.
    pub rows: u32,
    /// First output row of this binding.
    pub row0: u32,
    /// Activation columns (tokens).
    pub n: u32,
    pub row_bytes: u32,
    /// Output row length (all rows of the weight).
    pub m: u32,
}
const _: () = assert!(size_of::<MulMatParams>() == wgsl_params::MUL_MAT);

/// `x` is `[k, n]`, `y` is `[w.n_rows, n]`. `x_uniform`: bind `x` as a uniform buffer of that
/// many vec4s (its whole size); the recording decides where (CPU adapters, decode).
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    w: &GpuWeight<T::Buffer>,
    x: &T::Buffer,
    y: &T::Buffer,
    n: usize,
    x_uniform: Option<usize>,
) -> Result<(), GpuError> {
    let ty_define = type_define(w.ty).ok_or_else(|| GpuError::UnsupportedType {
        name: "matmul weight".into(),
        ty: w.ty,
    })?;
    if w.k % 4 != 0 {
        // The activations are read as vec4s.
        return Err(GpuError::Unsupported(format!(
            "matmul with rows of {} elements (needs a multiple of 4)",
            w.k
        )));
    }
    let n_chunks = w.k.div_ceil(32);
    let row_per_workgroup = !rec.gpu.is_cpu();
    // Short rows leave most of a wide workgroup idle.
    let wg = if row_per_workgroup && n_chunks <= 32 {
        WG_SHORT
    } else {
        WG
    };
    let tile = !row_per_workgroup && n > 1;
    let wide_tile = tile && w.n_rows >= TALL;
    let nc = if n == 1 {
        1
    } else if wide_tile {
        WIDE_TILE_COLUMNS
    } else if tile {
        TILE_COLUMNS
    } else {
        BATCH_COLUMNS
    };
    let nr = if tile {
        TILE_ROWS
    } else if w.n_rows >= TALL {
        CPU_ROWS
    } else {
        1
    };
    let mut defines = vec![(ty_define, 1), ("WG", wg)];
    defines.extend(alignment_define(rec.gpu, w));
    if row_per_workgroup {
        defines.extend([("ROW_PER_WORKGROUP", 1), ("NC", nc)]);
    } else if tile {
        defines.extend([("TILE", 1), ("TILE_COLS", nc)]);
        if wide_tile {
            defines.push(("TILE_WIDE", 1));
        }
    } else {
        defines.push(("NR", nr));
    }
    if let Some(vec4s) = x_uniform {
        defines.push(("X_UNIFORM", u32_of("uniform activations", vec4s)? as u32));
    }
    let key = PipelineKey {
        family: "mul_mat.wgsl",
        entry: "main",
        defines,
    };
    let rows_per_group = if row_per_workgroup { 1 } else { wg * nr };
    dispatch_parts(rec, w, key, x, y, n, rows_per_group as usize, nc as usize)
}

/// One dispatch of `key` (a matmul kernel with `mul_mat.wgsl`'s parameters and bindings) per
/// weight part: `rows_per_group` weight rows per workgroup, `cols` activation columns per z.
#[allow(clippy::too_many_arguments)]
pub fn dispatch_parts<T: Target>(
    rec: &mut Recorder<T>,
    w: &GpuWeight<T::Buffer>,
    key: PipelineKey,
    x: &T::Buffer,
    y: &T::Buffer,
    n: usize,
    rows_per_group: usize,
    cols: usize,
) -> Result<(), GpuError> {
    for part in &w.parts {
        u32_of("weight part bytes", part.rows * w.row_bytes)?;
        let params = MulMatParams {
            k: w.k as u32,
            rows: part.rows as u32,
            row0: part.row0 as u32,
            n: n as u32,
            row_bytes: w.row_bytes as u32,
            m: w.n_rows as u32,
        };
        let groups = rec.grid(part.rows.div_ceil(rows_per_group), n.div_ceil(cols))?;
        rec.dispatch(
            key.clone(),
            params,
            vec![(1, part.buffer.clone()), (2, x.clone()), (3, y.clone())],
            groups,
        )?;
    }
    Ok(())
}
