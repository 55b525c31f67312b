//! A graph prepared for the device: buffers planned once per graph shape (the CPU backend's
//! liveness plan), then each step writes the step inputs (position, token ids, output rows),
//! queues every node's kernels on the stream and reads back only what was asked: the output
//! rows, their greedy ids or one sampled token.
//!
//! Decode steps (one token) are captured into a CUDA graph on their second run and replayed
//! after that (one launch instead of hundreds); every per-step value is read from the step
//! buffer on the device, so the captured launches stay valid. `TESSERA_CUDA_GRAPHS=0` turns
//! capture off.

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;
use tessera_core::backend::Batch;
use tessera_core::graph::{Graph, NodeId, Op};
use tessera_core::plan::Plan;
use tessera_core::sampling::{SPEC_EDITS, SPEC_HEADER};

use crate::device::{Arg, DevBuf, Gpu, Queue};
use crate::error::CudaError;
use crate::kv::CudaKv;
use crate::ops::matmul::{self, IdShape, MatmulScratch};
use crate::ops::{self, attention, elementwise, RopeArgs};
use crate::weights::CudaWeights;

use Arg::{F32, U32};

/// What a step reads back.
#[derive(Clone, Debug, PartialEq)]
pub enum Readout {
    Logits,
    Greedy,
    /// The last output row sampled by the chain with these spec words.
    Sampled(Vec<u32>),
}

/// A captured decode step.
struct Captured(CudaGraph);

// SAFETY: a CUDA graph's handles may be used from any thread with its context current (the
// backend binds it at each step); the backend is used by one thread at a time (`Send`, not
// `Sync`), so the graph is never launched concurrently.
unsafe impl Send for Captured {}

pub struct StepGraph {
    graph: Graph,
    plan: Plan,
    slots: Vec<DevBuf>,
    /// [pos0, tokens..., output rows...] as u32.
    step: DevBuf,
    scratch: MatmulScratch,
    ids: DevBuf,
    spec: DevBuf,
    chain_result: DevBuf,
    chain_work: DevBuf,
    captured: Option<Captured>,
    runs: usize,
}

impl StepGraph {
    pub fn new(
        gpu: &impl Queue,
        graph: &Graph,
        weights: &CudaWeights,
    ) -> Result<StepGraph, CudaError> {
        let plan = Plan::new(graph);
        let slots = plan
            .slot_len
            .iter()
            .map(|&len| gpu.alloc(len * 4))
            .collect::<Result<Vec<_>, _>>()?;
        let (t, n_out) = (graph.n_tokens, graph.n_outputs);
        let (mut max_x, mut max_w16, mut max_x16) = (0, 0, 0);
        for node in &graph.nodes {
            if let Op::MulMat { x, w } | Op::MulMatId { x, w, .. } = node.op {
                let n_x = graph.node(x).n_elements();
                max_x = max_x.max(n_x);
                let cols = n_x / weights.get(w).k.max(1);
                if matches!(node.op, Op::MulMat { .. }) && matmul::uses_gemm(cols) {
                    let gw = weights.get(w);
                    max_w16 = max_w16.max(gw.k * gw.n_rows);
                    max_x16 = max_x16.max(n_x);
                }
            }
        }
        let width = graph.node(graph.output).ne[0].max(1);
        Ok(StepGraph {
            graph: graph.clone(),
            plan,
            slots,
            step: gpu.alloc((1 + t + n_out) * 4)?,
            scratch: MatmulScratch::new(gpu, max_x, max_w16, max_x16)?,
            ids: gpu.alloc(n_out.max(1) * 4)?,
            spec: gpu.alloc((SPEC_HEADER + 2 * SPEC_EDITS) * 4)?,
            chain_result: gpu.alloc(8)?,
            chain_work: gpu.alloc(3 * width * 4)?,
            captured: None,
            runs: 0,
        })
    }

    pub fn runs_graph(&self, graph: &Graph) -> bool {
        self.graph == *graph
    }

    fn buf(&self, id: NodeId) -> u64 {
        self.slots[self.plan.slot_of[id.0 as usize]].ptr
    }

    /// Runs one step; the first `out.len()` words of what `readout` asks for land in `out`.
    pub fn run(
        &mut self,
        gpu: &mut Gpu,
        weights: &CudaWeights,
        kv: &CudaKv,
        batch: &Batch,
        readout: &Readout,
        out: &mut [u32],
    ) -> Result<(), CudaError> {
        let segment = batch
            .single()
            .map_err(|e| CudaError::Unsupported(e.to_string()))?;
        let mut words = Vec::with_capacity(1 + batch.tokens.len() + batch.output_rows.len());
        words.push(segment.pos0 as u32);
        words.extend_from_slice(batch.tokens);
        words.extend(batch.output_rows.iter().map(|&r| r as u32));
        gpu.write(&self.step, 0, &words)?;
        self.queue_nodes_or_replay(gpu, weights, kv)?;
        let output = self.buf(self.graph.output);
        let width = self.graph.node(self.graph.output).ne[0];
        let src = match readout {
            Readout::Logits => output,
            Readout::Greedy => {
                ops::argmax(gpu, output, self.ids.ptr, width, self.graph.n_outputs)?;
                self.ids.ptr
            }
            Readout::Sampled(spec) => {
                let row = self.graph.n_outputs.checked_sub(1).ok_or_else(|| {
                    CudaError::Unsupported("sampling a graph without outputs".into())
                })?;
                gpu.write(&self.spec, 0, spec)?;
                ops::sample_chain(
                    gpu,
                    output,
                    width,
                    row,
                    self.spec.ptr,
                    self.chain_result.ptr,
                    self.chain_work.ptr,
                )?;
                self.chain_result.ptr
            }
        };
        // The readouts hold at least this many words: the output rows, one id per row, or
        // (status, token).
        let available = match readout {
            Readout::Logits => self.graph.node(self.graph.output).n_elements(),
            Readout::Greedy => self.graph.n_outputs,
            Readout::Sampled(_) => 2,
        };
        let n = out.len().min(available);
        gpu.read_at(src, &mut out[..n])
    }

    fn queue_nodes_or_replay(
        &mut self,
        gpu: &mut Gpu,
        weights: &CudaWeights,
        kv: &CudaKv,
    ) -> Result<(), CudaError> {
        self.runs += 1;
        if let Some(g) = &self.captured {
            return Ok(g.0.launch()?);
        }
        let capture = self.graph.n_tokens == 1
            && self.runs >= 2
            && std::env::var("TESSERA_CUDA_GRAPHS").map_or(true, |v| v != "0");
        if !capture {
            return self.queue_nodes(gpu, weights, kv);
        }
        gpu.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)?;
        let queued = self.queue_nodes(gpu, weights, kv);
        let graph = gpu.stream.end_capture(CUgraphInstantiate_flags(0))?;
        queued?;
        let graph =
            graph.ok_or_else(|| CudaError::Driver("an empty CUDA graph was captured".into()))?;
        graph.launch()?;
        self.captured = Some(Captured(graph));
        Ok(())
    }

    /// Queues every node's kernels on `gpu` (public for the tests that record the launches).
    pub fn queue_nodes<Q: Queue>(
        &mut self,
        gpu: &mut Q,
        weights: &CudaWeights,
        kv: &CudaKv,
    ) -> Result<(), CudaError> {
        // The matmul inputs quantized by the last step are stale.
        self.scratch.holds = None;
        let t = self.graph.n_tokens;
        let pos0 = self.step.ptr;
        let tokens = self.step.ptr + 4;
        let rows = self.step.ptr + 4 * (1 + t as u64);
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            let y = self.slots[self.plan.slot_of[i]].ptr;
            let n = node.n_elements();
            let ew =
                |gpu: &mut Q, file: &'static str, name: &str, inputs: &[u64], extra: Vec<Arg>| {
                    elementwise(gpu, file, name, inputs, y, n, extra)
                };
            match node.op {
                Op::Reshape { .. } => {}
                Op::GetRows { table } => ops::get_rows(gpu, weights.get(table), tokens, t, y)?,
                Op::RmsNorm { x, eps } => {
                    ops::rms_norm(gpu, self.buf(x), 0, y, node.ne[0], n / node.ne[0], eps)?
                }
                Op::MulWeight { x, w } => {
                    let w = weights.get(w).f32_vector()?;
                    ew(
                        gpu,
                        "elementwise.cu",
                        "mul_weight",
                        &[self.buf(x), w],
                        vec![U32(node.ne[0] as u32)],
                    )?
                }
                Op::AddWeight { x, w } => {
                    let w = weights.get(w).f32_vector()?;
                    ew(
                        gpu,
                        "elementwise.cu",
                        "add_weight",
                        &[self.buf(x), w],
                        vec![U32(node.ne[0] as u32)],
                    )?
                }
                Op::Add { a, b } => ew(
                    gpu,
                    "elementwise.cu",
                    "add",
                    &[self.buf(a), self.buf(b)],
                    vec![],
                )?,
                Op::Scale { x, s } => {
                    ew(gpu, "elementwise.cu", "scale", &[self.buf(x)], vec![F32(s)])?
                }
                Op::Softcap { x, cap } => ew(
                    gpu,
                    "elementwise.cu",
                    "softcap",
                    &[self.buf(x)],
                    vec![F32(cap)],
                )?,
                Op::MulMat { w, x } => {
                    let x_ptr = self.buf(x);
                    matmul::mul_mat(
                        gpu,
                        &mut self.scratch,
                        weights.get(w),
                        x.0,
                        x_ptr,
                        node.ne[1],
                        y,
                    )?
                }
                Op::Rope { x, params } => {
                    let factors = match params.freq_factors {
                        Some(f) => weights.get(f).f32_vector()?,
                        None => 0,
                    };
                    let a = RopeArgs::new(&params, node.ne[0], node.ne[1], node.ne[2])?;
                    ops::rope(gpu, &a, pos0, self.buf(x), factors, y)?
                }
                Op::Attention { q, k, v, params } => {
                    let layer = kv.layers.get(params.layer).ok_or_else(|| {
                        CudaError::Unsupported(format!("no KV cache for layer {}", params.layer))
                    })?;
                    attention::store(gpu, pos0, self.buf(k), self.buf(v), layer, t)?;
                    let sinks = match params.sinks {
                        Some(s) => weights.get(s).f32_vector()?,
                        None => 0,
                    };
                    attention::attend(gpu, pos0, self.buf(q), layer, sinks, y, &params, t)?
                }
                Op::Swiglu { gate, up } => ew(
                    gpu,
                    "glu.cu",
                    "swiglu",
                    &[self.buf(gate), self.buf(up)],
                    vec![],
                )?,
                Op::Geglu { gate, up } => ew(
                    gpu,
                    "glu.cu",
                    "geglu",
                    &[self.buf(gate), self.buf(up)],
                    vec![],
                )?,
                Op::Reglu { gate, up } => ew(
                    gpu,
                    "glu.cu",
                    "reglu",
                    &[self.buf(gate), self.buf(up)],
                    vec![],
                )?,
                Op::SwigluOai {
                    gate,
                    up,
                    alpha,
                    limit,
                } => ew(
                    gpu,
                    "glu.cu",
                    "swiglu_oai",
                    &[self.buf(gate), self.buf(up)],
                    vec![F32(alpha), F32(limit)],
                )?,
                Op::Activation { x, act } => ops::activation(gpu, self.buf(x), act, y, n)?,
                Op::MoeRoute { logits, params } => {
                    let bias = match params.selection_bias {
                        Some(b) => weights.get(b).f32_vector()?,
                        None => 0,
                    };
                    let ln = self.graph.node(logits).ne;
                    ops::moe_route(gpu, self.buf(logits), bias, y, ln[0], ln[1], &params)?
                }
                Op::MulMatId { w, x, route } => {
                    let shape = IdShape {
                        m: node.ne[0],
                        n_used: node.ne[1],
                        n_tokens: node.ne[2],
                        shared_x: self.graph.node(x).ne[1] == 1,
                    };
                    let (x_ptr, r_ptr) = (self.buf(x), self.buf(route));
                    matmul::mul_mat_id(
                        gpu,
                        &mut self.scratch,
                        weights.get(w),
                        x.0,
                        x_ptr,
                        r_ptr,
                        y,
                        &shape,
                    )?
                }
                Op::AddId { x, bias, route } => {
                    let bias = weights.get(bias).f32_vector()?;
                    let extra = vec![U32(node.ne[0] as u32), U32(node.ne[1] as u32)];
                    // add_id's arguments: x, bias, route, y, n, m, n_used.
                    ew(
                        gpu,
                        "elementwise.cu",
                        "add_id",
                        &[self.buf(x), bias, self.buf(route)],
                        extra,
                    )?
                }
                Op::MoeSum { x, route } => {
                    let n_used = self.graph.node(x).ne[1] as u32;
                    ew(
                        gpu,
                        "moe.cu",
                        "moe_sum",
                        &[self.buf(x), self.buf(route)],
                        vec![U32(node.ne[0] as u32), U32(n_used)],
                    )?
                }
                Op::Slice { x, offset, len } => {
                    let width = self.graph.node(x).ne[0] as u32;
                    ew(
                        gpu,
                        "elementwise.cu",
                        "slice",
                        &[self.buf(x)],
                        vec![U32(width), U32(offset as u32), U32(len as u32)],
                    )?
                }
                Op::OutputRows { x } => ew(
                    gpu,
                    "elementwise.cu",
                    "output_rows",
                    &[self.buf(x), rows],
                    vec![U32(node.ne[0] as u32)],
                )?,
            }
        }
        Ok(())
    }
}
