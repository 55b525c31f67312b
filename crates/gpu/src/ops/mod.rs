//! Dispatch builders, one file per op (`<op>.rs` drives `shaders/wgsl/<op>.wgsl`), each with
//! its parameter struct and shape guards next to the kernel; `kv.rs` (the KV store and shift),
//! `quantize.rs` (activation rounding before matmuls) and `sample.rs` serve the ops and steps.

pub mod activation;
pub mod add;
pub mod add_id;
pub mod add_weight;
pub mod attention;
pub mod geglu;
pub mod get_rows;
pub mod kv;
pub mod moe_route;
pub mod moe_sum;
pub mod mul_mat;
pub mod mul_mat_id;
pub mod mul_mat_q8;
pub mod mul_weight;
pub mod output_rows;
pub mod quantize;
pub mod reglu;
pub mod rms_norm;
pub mod rope;
pub mod sample;
pub mod scale;
pub mod slice;
pub mod softcap;
pub mod swiglu;
pub mod swiglu_oai;

use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::target::Target;

/// u32 fields in the kernels' parameter blocks: a size that does not fit is an error.
pub fn u32_of(what: &str, v: usize) -> Result<usize, GpuError> {
    if v > u32::MAX as usize {
        return Err(GpuError::Unsupported(format!(
            "{what} = {v} exceeds 32 bits"
        )));
    }
    Ok(v)
}

/// Dispatches an element-wise kernel (`elementwise.inc.wgsl`'s frame): `inputs` at bindings
/// 1, 2 and 4, `y` at 3, one invocation per output float.
fn per_element<P: bytemuck::Pod, T: Target>(
    rec: &mut Recorder<T>,
    family: &'static str,
    params: P,
    inputs: &[&T::Buffer],
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    per_element_with(rec, family, vec![], params, inputs, y, n)
}

/// [`per_element`] with defines.
fn per_element_with<P: bytemuck::Pod, T: Target>(
    rec: &mut Recorder<T>,
    family: &'static str,
    defines: Vec<crate::shaders::Define>,
    params: P,
    inputs: &[&T::Buffer],
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let key = PipelineKey {
        family,
        entry: "main",
        defines,
    };
    // `elementwise.inc.wgsl`'s input bindings, in order (y is at 3).
    let mut buffers: Vec<(u32, T::Buffer)> = [1, 2, 4]
        .into_iter()
        .zip(inputs.iter().map(|b| (*b).clone()))
        .collect();
    if buffers.len() < inputs.len() {
        return Err(GpuError::Unsupported(format!(
            "{family}: {} inputs to an element-wise kernel",
            inputs.len()
        )));
    }
    buffers.push((3, y.clone()));
    let groups = rec.grid(n.div_ceil(256), 1)?;
    rec.dispatch(key, params, buffers, groups)
}
