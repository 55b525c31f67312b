//! Dispatch builders, one op family per file, each with its shape guards next to the kernel
//! it drives (`shaders/wgsl/<family>.wgsl`).

pub mod attention;
pub mod elementwise;
pub mod kv;
pub mod mul_mat;
pub mod quantize;
pub mod rms_norm;
pub mod rope;
pub mod rows;
pub mod sample;

use crate::error::WgpuError;

/// u32 fields in the kernels' parameter blocks: a size that does not fit is an error.
pub fn u32_of(what: &str, v: usize) -> Result<usize, WgpuError> {
    if v > u32::MAX as usize {
        return Err(WgpuError::Unsupported(format!(
            "{what} = {v} exceeds 32 bits"
        )));
    }
    Ok(v)
}
