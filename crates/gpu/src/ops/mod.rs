//! Dispatch builders, one file per op (`<op>.rs` drives `shaders/wgsl/<op>.wgsl`), each with
//! its parameter struct and shape guards next to the kernel, except the element-wise ops: one
//! table (`elementwise.rs`) over one kernel file (`elementwise.wgsl`). `kv.rs` (the KV store
//! and shift), `quantize.rs` (activation rounding before matmuls) and `sample.rs` serve the
//! ops and steps.

pub mod attention;
pub mod elementwise;
pub mod get_rows;
pub mod kv;
pub mod moe_route;
pub mod mul_mat;
pub mod mul_mat_id;
pub mod mul_mat_q8;
pub mod output_rows;
pub mod quantize;
pub mod rms_norm;
pub mod rope;
pub mod sample;

use crate::error::GpuError;

/// u32 fields in the kernels' parameter blocks: a size that does not fit is an error.
pub fn u32_of(what: &str, v: usize) -> Result<usize, GpuError> {
    if v > u32::MAX as usize {
        return Err(GpuError::Unsupported(format!(
            "{what} = {v} exceeds 32 bits"
        )));
    }
    Ok(v)
}
