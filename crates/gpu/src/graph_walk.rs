//! The graph walk both GPU backends share: every node of a graph turned into its op's
//! dispatches (`ops::*::record`) over buffers the backend made (the planner's activation
//! slots, the step inputs, the rounded-activation scratch), the weights and the KV cache.

use tessera_core::graph::{Graph, NodeId, Op};
use tessera_core::plan::Plan;

use crate::error::GpuError;
use crate::kv::GpuKv;
use crate::ops::elementwise::{self, Elementwise};
use crate::ops::quantize::act_rounding;
use crate::ops::{
    attention, get_rows, moe_route, mul_mat, mul_mat_id, mul_mat_q8, output_rows, quantize,
    rms_norm, rope,
};
use crate::recorder::Recorder;
use crate::target::Target;
use crate::weights::{GpuWeight, GpuWeights};

/// The buffers a graph's dispatches bind, made by the backend for one graph shape.
pub struct GraphBuffers<'b, B> {
    pub plan: &'b Plan,
    /// One per planner slot (`plan.slot_len[i]` floats).
    pub slots: &'b [B],
    /// The step inputs: (pos0, n_tokens, n_outputs, 0), the tokens, the output rows.
    pub step: &'b B,
    /// [`activations_len`] floats: matmul inputs rounded as ggml's CPU backend rounds them.
    pub acts: &'b B,
    /// `acts` is also bound as a uniform buffer of this many vec4s ([`uniform_activations`]).
    pub acts_uniform: Option<usize>,
}

/// Floats of the rounded-activation scratch: one buffer, refilled when a matmul needs
/// another input or rounding (q, k and v share theirs, as do gate and up).
pub fn activations_len(graph: &Graph) -> usize {
    graph
        .nodes
        .iter()
        .filter_map(|n| match n.op {
            Op::MulMat { x, .. } | Op::MulMatId { x, .. } => Some(graph.node(x).n_elements()),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// CPU adapters read the activations of decode matmuls from a uniform buffer where it fits
/// one (`mul_mat::record`): lavapipe (Mesa 22) loads a storage buffer lane by lane, a scalar
/// loop with a bounds check per lane, a uniform buffer with one gather. The vec4s, if so: the
/// activations' length rounded up to one of the prebuilt sizes
/// (`tessera_kernels::variants::uniform_capacity`); the buffer is allocated at that size
/// ([`activations_alloc_len`]), as the kernel declares it.
pub fn uniform_activations<T: Target>(gpu: &T, graph: &Graph, act_len: usize) -> Option<usize> {
    if !gpu.is_cpu() || graph.n_tokens != 1 || !act_len.is_multiple_of(4) {
        return None;
    }
    let vec4s = tessera_kernels::variants::uniform_capacity(act_len / 4)? as usize;
    (vec4s as u64 * 16 <= gpu.max_uniform_binding()).then_some(vec4s)
}

/// Floats to allocate for the rounded activations: [`activations_len`], or the uniform
/// binding's size where it is larger.
pub fn activations_alloc_len(act_len: usize, uniform_vec4s: Option<usize>) -> usize {
    act_len.max(uniform_vec4s.map_or(0, |v| 4 * v)).max(1)
}

/// Records every node of `graph` into `rec`.
pub fn record_nodes<T: Target>(
    rec: &mut Recorder<T>,
    graph: &Graph,
    bufs: &GraphBuffers<T::Buffer>,
    weights: &GpuWeights<T::Buffer>,
    kv: &GpuKv<T::Buffer>,
) -> Result<(), GpuError> {
    let (t, n_out) = (graph.n_tokens, graph.n_outputs);
    let buf = |id: NodeId| &bufs.slots[bufs.plan.slot_of[id.0 as usize]];
    let mut acts_of: Option<(usize, &'static str, bool)> = None;
    for (i, node) in graph.nodes.iter().enumerate() {
        let y = &bufs.slots[bufs.plan.slot_of[i]];
        let n = node.n_elements();
        match node.op {
            Op::Reshape { .. } => {}
            Op::GetRows { table } => get_rows::record(rec, weights.get(table), bufs.step, y, t)?,
            Op::RmsNorm { x, eps } => {
                rms_norm::record(rec, buf(x), y, node.ne[0], n / node.ne[0], eps)?
            }
            Op::MulWeight { x, w } => {
                let row = weights.get(w).f32_vector("norm weight")?;
                let op = Elementwise::MulWeight { width: node.ne[0] };
                elementwise::record(rec, op, &[buf(x), row], y, n)?
            }
            Op::AddWeight { x, w } => {
                let row = weights.get(w).f32_vector("bias")?;
                let op = Elementwise::AddWeight { width: node.ne[0] };
                elementwise::record(rec, op, &[buf(x), row], y, n)?
            }
            Op::Add { a, b } => {
                elementwise::record(rec, Elementwise::Add, &[buf(a), buf(b)], y, n)?
            }
            Op::Scale { x, s } => elementwise::record(rec, Elementwise::Scale(s), &[buf(x)], y, n)?,
            Op::MulMat { w, x } => {
                let gw = weights.get(w);
                let n_x = graph.node(x).n_elements();
                if let Some(act) = int_dot(rec.gpu, gw, graph.node(x).ne[0]) {
                    let key = Some((x.0 as usize, act.0, true));
                    if acts_of != key {
                        quantize::record(rec, act.0, act.1, true, buf(x), bufs.acts, n_x)?;
                        acts_of = key;
                    }
                    mul_mat_q8::record(rec, gw, bufs.acts, y, node.ne[1])?;
                    continue;
                }
                let rounded = round_activations(rec, bufs.acts, &mut acts_of, gw, x, buf(x), n_x)?;
                let (input, input_uniform) = match rounded {
                    true => (bufs.acts, bufs.acts_uniform),
                    false => (buf(x), None),
                };
                mul_mat::record(rec, gw, input, y, node.ne[1], input_uniform)?
            }
            Op::Rope { x, params } => {
                let factors = match params.freq_factors {
                    Some(f) => Some(weights.get(f).f32_vector("rope frequency factors")?),
                    None => None,
                };
                let ne = node.ne;
                rope::record(
                    rec,
                    bufs.step,
                    buf(x),
                    y,
                    ne[0],
                    ne[1],
                    ne[2],
                    &params,
                    factors,
                )?
            }
            Op::Attention { q, k, v, params } => {
                let layer = kv.layers.get(params.layer).ok_or_else(|| {
                    GpuError::Unsupported(format!("no KV cache for layer {}", params.layer))
                })?;
                attention::store(rec, bufs.step, buf(k), buf(v), layer, t)?;
                let sinks = match params.sinks {
                    Some(s) => Some(weights.get(s).f32_vector("attention sinks")?),
                    None => None,
                };
                attention::attend(rec, bufs.step, buf(q), layer, sinks, y, &params, t)?;
            }
            Op::Swiglu { gate, up } => {
                elementwise::record(rec, Elementwise::Swiglu, &[buf(gate), buf(up)], y, n)?
            }
            Op::Geglu { gate, up } => {
                elementwise::record(rec, Elementwise::Geglu, &[buf(gate), buf(up)], y, n)?
            }
            Op::Reglu { gate, up } => {
                elementwise::record(rec, Elementwise::Reglu, &[buf(gate), buf(up)], y, n)?
            }
            Op::SwigluOai {
                gate,
                up,
                alpha,
                limit,
            } => {
                let op = Elementwise::SwigluOai { alpha, limit };
                elementwise::record(rec, op, &[buf(gate), buf(up)], y, n)?
            }
            Op::Activation { x, act } => {
                elementwise::record(rec, Elementwise::Activation(act), &[buf(x)], y, n)?
            }
            Op::Softcap { x, cap } => {
                elementwise::record(rec, Elementwise::Softcap(cap), &[buf(x)], y, n)?
            }
            Op::MoeRoute { logits, params } => {
                let bias = match params.selection_bias {
                    Some(b) => Some(weights.get(b).f32_vector("expert selection bias")?),
                    None => None,
                };
                let ln = graph.node(logits).ne;
                moe_route::record(rec, buf(logits), bias, y, ln[0], ln[1], &params)?
            }
            Op::MulMatId { w, x, route } => {
                let gw = weights.get(w);
                let n_x = graph.node(x).n_elements();
                let rounded = round_activations(rec, bufs.acts, &mut acts_of, gw, x, buf(x), n_x)?;
                let input = if rounded { bufs.acts } else { buf(x) };
                let shape = mul_mat_id::MulMatIdShape {
                    m: node.ne[0],
                    n_used: node.ne[1],
                    n_tokens: node.ne[2],
                    shared_x: graph.node(x).ne[1] == 1,
                };
                mul_mat_id::record(rec, gw, input, buf(route), y, &shape)?
            }
            Op::AddId { x, bias, route } => {
                let bias = weights.get(bias).f32_vector("expert biases")?;
                let (m, n_used) = (node.ne[0], node.ne[1]);
                let op = Elementwise::AddId { m, n_used };
                elementwise::record(rec, op, &[buf(x), bias, buf(route)], y, n)?
            }
            Op::MoeSum { x, route } => {
                let n_used = graph.node(x).ne[1];
                let op = Elementwise::MoeSum {
                    m: node.ne[0],
                    n_used,
                };
                elementwise::record(rec, op, &[buf(x), buf(route)], y, n)?
            }
            Op::Slice { x, offset, len } => {
                let width = graph.node(x).ne[0];
                let op = Elementwise::Slice { width, offset, len };
                elementwise::record(rec, op, &[buf(x)], y, n)?
            }
            Op::OutputRows { x } => {
                output_rows::record(rec, bufs.step, buf(x), y, node.ne[0], t, n_out)?
            }
        }
    }
    Ok(())
}

/// The packed activations' quantization where a matmul of `w` (rows of `k`) takes the
/// integer-dot kernel: the target has it on, the type is one it reads, `k` whole chunks.
fn int_dot<T: Target>(
    gpu: &T,
    w: &GpuWeight<T::Buffer>,
    k: usize,
) -> Option<(&'static str, usize)> {
    let act = mul_mat_q8::int_dot_rounding(w.ty)?;
    (gpu.int_dot_kernels() && k.is_multiple_of(act.1)).then_some(act)
}

/// Rounds the matmul input `x` (`n_x` floats in `x_buf`) into the scratch `acts` as ggml's CPU
/// backend quantizes activations for weights like `w`; false where they stay f32. `x` stays
/// unchanged while it is live, so its rounding is reused by every matmul on it until another
/// input or format needs the scratch (`acts_of` says what it holds: input, format, packed).
#[allow(clippy::too_many_arguments)]
fn round_activations<T: Target>(
    rec: &mut Recorder<T>,
    acts: &T::Buffer,
    acts_of: &mut Option<(usize, &'static str, bool)>,
    w: &GpuWeight<T::Buffer>,
    x: NodeId,
    x_buf: &T::Buffer,
    n_x: usize,
) -> Result<bool, GpuError> {
    let Some((define, block)) = act_rounding(w.ty) else {
        return Ok(false);
    };
    if *acts_of != Some((x.0 as usize, define, false)) {
        quantize::record(rec, define, block, false, x_buf, acts, n_x)?;
        *acts_of = Some((x.0 as usize, define, false));
    }
    Ok(true)
}
