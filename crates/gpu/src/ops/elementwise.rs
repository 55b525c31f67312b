//! The element-wise ops: one kernel file (`elementwise.wgsl`), one define per op, one
//! invocation per output float. [`Elementwise`] is the table: each op's define, the inputs it
//! reads (bindings 1, 2 and 4; the output at 3) and its parameters in the kernel's slots
//! (`u0..u2` integers, `f0`, `f1` floats).

use tessera_core::graph::Activation;

use super::u32_of;
use crate::error::GpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

/// `elementwise.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ElementwiseParams {
    /// Output floats.
    pub n: u32,
    /// The op's integer parameters (`u0..u2`).
    pub u: [u32; 3],
    /// The op's float parameters (`f0`, `f1`).
    pub f: [f32; 2],
}
const _: () = assert!(size_of::<ElementwiseParams>() == wgsl_params::ELEMENTWISE);

/// An element-wise op with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Elementwise {
    /// `a + b` (the residual sums).
    Add,
    /// `a + b[i % width]`: a bias row added to every row.
    AddWeight { width: usize },
    /// `a * b[i % width]`: a weight row (a norm's) multiplied into every row.
    MulWeight { width: usize },
    /// `a * s`.
    Scale(f32),
    /// `cap * tanh(a / cap)`.
    Softcap(f32),
    /// `silu(gate) * up`, gate in `a`, up in `b`.
    Swiglu,
    /// `gelu(gate) * up` (ggml's f16-table GELU).
    Geglu,
    /// `relu(gate) * up`.
    Reglu,
    /// gpt-oss's clamped SwiGLU.
    SwigluOai { alpha: f32, limit: f32 },
    /// The experts' outputs `[m, n_used, T]` (`a`) weighted by the route (`b`) and summed →
    /// `[m, T]`.
    MoeSum { m: usize, n_used: usize },
    /// The experts' outputs `[m, n_used, T]` (`a`) plus the biases `[m, n_expert]` (`b`) of
    /// the experts in the route (`c`).
    AddId { m: usize, n_used: usize },
    /// Elements `offset .. offset + len` of every row (of `width`) of `a`.
    Slice {
        width: usize,
        offset: usize,
        len: usize,
    },
    /// A gateless feed-forward's activation of `a`.
    Activation(Activation),
}

/// One row of the table: the op's define, its inputs, its integer and float parameters.
struct Row {
    define: &'static str,
    inputs: usize,
    u: [usize; 3],
    f: [f32; 2],
}

impl Elementwise {
    fn row(self) -> Row {
        let row = |define, inputs, u, f| Row {
            define,
            inputs,
            u,
            f,
        };
        match self {
            Elementwise::Add => row("OP_ADD", 2, [0; 3], [0.0; 2]),
            // The width is a modulus in the kernel.
            Elementwise::AddWeight { width } => {
                row("OP_ADD_WEIGHT", 2, [width.max(1), 0, 0], [0.0; 2])
            }
            Elementwise::MulWeight { width } => {
                row("OP_MUL_WEIGHT", 2, [width.max(1), 0, 0], [0.0; 2])
            }
            Elementwise::Scale(s) => row("OP_SCALE", 1, [0; 3], [s, 0.0]),
            Elementwise::Softcap(cap) => row("OP_SOFTCAP", 1, [0; 3], [cap, 0.0]),
            Elementwise::Swiglu => row("OP_SWIGLU", 2, [0; 3], [0.0; 2]),
            Elementwise::Geglu => row("OP_GEGLU", 2, [0; 3], [0.0; 2]),
            Elementwise::Reglu => row("OP_REGLU", 2, [0; 3], [0.0; 2]),
            Elementwise::SwigluOai { alpha, limit } => {
                row("OP_SWIGLU_OAI", 2, [0; 3], [alpha, limit])
            }
            Elementwise::MoeSum { m, n_used } => row("OP_MOE_SUM", 2, [m, n_used, 0], [0.0; 2]),
            Elementwise::AddId { m, n_used } => row("OP_ADD_ID", 3, [m, n_used, 0], [0.0; 2]),
            Elementwise::Slice { width, offset, len } => {
                row("OP_SLICE", 1, [len, width, offset], [0.0; 2])
            }
            Elementwise::Activation(Activation::Silu) => row("OP_SILU", 1, [0; 3], [0.0; 2]),
            Elementwise::Activation(Activation::Gelu) => row("OP_GELU", 1, [0; 3], [0.0; 2]),
            Elementwise::Activation(Activation::Relu) => row("OP_RELU", 1, [0; 3], [0.0; 2]),
        }
    }

    /// The op's define in `elementwise.wgsl`.
    pub fn define(self) -> &'static str {
        self.row().define
    }
}

/// `y = op(inputs)` over `n` output floats.
pub fn record<T: Target>(
    rec: &mut Recorder<T>,
    op: Elementwise,
    inputs: &[&T::Buffer],
    y: &T::Buffer,
    n: usize,
) -> Result<(), GpuError> {
    let row = op.row();
    if inputs.len() != row.inputs {
        return Err(GpuError::Unsupported(format!(
            "{op:?} takes {} inputs, not {}",
            row.inputs,
            inputs.len()
        )));
    }
    let mut u = [0u32; 3];
    for (slot, &v) in u.iter_mut().zip(&row.u) {
        *slot = u32_of(row.define, v)? as u32;
    }
    let params = ElementwiseParams {
        n: u32_of("element-wise outputs", n)? as u32,
        u,
        f: row.f,
    };
    let key = PipelineKey {
        family: "elementwise.wgsl",
        entry: "main",
        defines: vec![(row.define, 1)],
    };
    // `elementwise.wgsl`'s input bindings, in order (y is at 3).
    let mut buffers: Vec<(u32, T::Buffer)> = [1, 2, 4]
        .into_iter()
        .zip(inputs.iter().map(|b| (*b).clone()))
        .collect();
    buffers.push((3, y.clone()));
    let groups = rec.grid(n.div_ceil(256), 1)?;
    rec.dispatch(key, params, buffers, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_a_listed_variant() {
        let ops = [
            Elementwise::Add,
            Elementwise::AddWeight { width: 1 },
            Elementwise::MulWeight { width: 1 },
            Elementwise::Scale(1.0),
            Elementwise::Softcap(1.0),
            Elementwise::Swiglu,
            Elementwise::Geglu,
            Elementwise::Reglu,
            Elementwise::SwigluOai {
                alpha: 1.0,
                limit: 1.0,
            },
            Elementwise::MoeSum { m: 1, n_used: 1 },
            Elementwise::AddId { m: 1, n_used: 1 },
            Elementwise::Slice {
                width: 1,
                offset: 0,
                len: 1,
            },
            Elementwise::Activation(Activation::Silu),
            Elementwise::Activation(Activation::Gelu),
            Elementwise::Activation(Activation::Relu),
        ];
        let mut defines: Vec<_> = ops.iter().map(|op| op.define()).collect();
        defines.sort();
        let mut listed = tessera_kernels::variants::ELEMENTWISE_OPS.to_vec();
        listed.sort();
        assert_eq!(defines, listed);
    }
}
