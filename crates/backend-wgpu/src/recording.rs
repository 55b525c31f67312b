//! A graph recorded for the GPU: buffers planned once per graph shape (the CPU backend's
//! liveness plan, so a forward pass needs a handful of activation buffers), every node's
//! dispatches recorded, and a staging buffer for the result. A step writes the step buffer
//! (token ids, positions, output rows), encodes the recording into one command buffer and
//! submits it once; only the result is read back.

use tessera_core::backend::Batch;
use tessera_core::graph::{Graph, NodeId, Op};
use tessera_core::plan::Plan;

use crate::device::Gpu;
use crate::error::WgpuError;
use crate::kv::GpuKv;
use crate::ops::quantize::act_rounding;
use crate::ops::{
    activation, add, add_id, add_weight, attention, geglu, get_rows, moe_route, moe_sum, mul_mat,
    mul_mat_id, mul_weight, output_rows, quantize, reglu, rms_norm, rope, sample, scale, slice,
    softcap, swiglu, swiglu_oai,
};
use crate::recorder::{encode, Dispatch, Recorder};
use crate::weights::GpuWeights;

/// What a step reads back: the output rows' logits, their greedy ids, or the last row's token
/// sampled by the GPU chain with these spec words (`ops::sample::spec_words`).
#[derive(Clone, Debug, PartialEq)]
pub enum Readout {
    Logits,
    Greedy,
    Sampled(Vec<u32>),
}

pub struct Recording {
    /// The graph recorded (a recording is reused only for an equal graph).
    graph: Graph,
    step: wgpu::Buffer,
    dispatches: Vec<Dispatch>,
    output: wgpu::Buffer,
    output_floats: usize,
    staging: wgpu::Buffer,
    /// Greedy sampling of every output row: the dispatch, the ids and their staging buffer.
    argmax: Vec<Dispatch>,
    ids: wgpu::Buffer,
    ids_staging: wgpu::Buffer,
    /// The sampling chain on the last output row: its dispatch, the per-step spec, the
    /// (status, token) result and its staging buffer, and its scratch.
    chain: Vec<Dispatch>,
    spec: wgpu::Buffer,
    chain_result: wgpu::Buffer,
    chain_staging: wgpu::Buffer,
    _chain_work: wgpu::Buffer,
    n_outputs: usize,
    n_tokens: usize,
}

impl Recording {
    pub fn new(
        gpu: &Gpu,
        graph: &Graph,
        weights: &GpuWeights,
        kv: &GpuKv,
    ) -> Result<Recording, WgpuError> {
        let plan = Plan::new(graph);
        let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
        let mut slots = Vec::with_capacity(plan.slot_len.len());
        for (i, &len) in plan.slot_len.iter().enumerate() {
            slots.push(gpu.buffer(
                &format!("activation slot {i}"),
                (len * 4) as u64,
                storage,
                false,
            )?);
        }
        let (t, n_out) = (graph.n_tokens, graph.n_outputs);
        let step = gpu.buffer(
            "step inputs",
            ((4 + t + n_out) * 4) as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            false,
        )?;
        let buf = |id: NodeId| &slots[plan.slot_of[id.0 as usize]];
        // Rounded activations for matmuls: one scratch buffer, refilled when a matmul needs
        // another input or rounding (q, k and v share theirs, as do gate and up).
        let act_len = graph
            .nodes
            .iter()
            .filter_map(|n| match n.op {
                Op::MulMat { x, .. } | Op::MulMatId { x, .. } => Some(graph.node(x).n_elements()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        // CPU adapters read the activations of decode matmuls from a uniform buffer where it
        // fits one (`mul_mat::record`): lavapipe (Mesa 22) loads a storage buffer lane by lane,
        // a scalar loop with a bounds check per lane, a uniform buffer with one gather.
        let acts_uniform = (gpu.is_cpu()
            && t == 1
            && act_len % 4 == 0
            && act_len * 4 <= gpu.limits.max_uniform_buffer_binding_size as usize)
            .then_some(act_len / 4);
        let acts_usage = match acts_uniform {
            Some(_) => storage | wgpu::BufferUsages::UNIFORM,
            None => storage,
        };
        let acts = gpu.buffer(
            "rounded activations",
            (act_len * 4) as u64,
            acts_usage,
            false,
        )?;
        let mut acts_of: Option<(usize, &'static str)> = None;
        let mut rec = Recorder::new(gpu);
        for (i, node) in graph.nodes.iter().enumerate() {
            let y = &slots[plan.slot_of[i]];
            let n = node.n_elements();
            match node.op {
                Op::Reshape { .. } => {}
                Op::GetRows { table } => {
                    get_rows::record(&mut rec, weights.get(table), &step, y, t)?
                }
                Op::RmsNorm { x, eps } => {
                    rms_norm::record(&mut rec, buf(x), y, node.ne[0], n / node.ne[0], eps)?
                }
                Op::MulWeight { x, w } => {
                    let row = weights.get(w).f32_vector("norm weight")?;
                    mul_weight::record(&mut rec, buf(x), row, node.ne[0], y, n)?
                }
                Op::AddWeight { x, w } => {
                    let row = weights.get(w).f32_vector("bias")?;
                    add_weight::record(&mut rec, buf(x), row, node.ne[0], y, n)?
                }
                Op::Add { a, b } => add::record(&mut rec, buf(a), buf(b), y, n)?,
                Op::Scale { x, s } => scale::record(&mut rec, buf(x), s, y, n)?,
                Op::MulMat { w, x } => {
                    let gw = weights.get(w);
                    let n_x = graph.node(x).n_elements();
                    let rounded =
                        round_activations(&mut rec, &acts, &mut acts_of, gw, x, buf(x), n_x)?;
                    let (input, input_uniform) = match rounded {
                        true => (&acts, acts_uniform),
                        false => (buf(x), None),
                    };
                    mul_mat::record(&mut rec, gw, input, y, node.ne[1], input_uniform)?
                }
                Op::Rope { x, params } => {
                    let factors = match params.freq_factors {
                        Some(f) => Some(weights.get(f).f32_vector("rope frequency factors")?),
                        None => None,
                    };
                    let ne = node.ne;
                    rope::record(
                        &mut rec,
                        &step,
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
                        WgpuError::Unsupported(format!("no KV cache for layer {}", params.layer))
                    })?;
                    attention::store(&mut rec, &step, buf(k), buf(v), layer, t)?;
                    let sinks = match params.sinks {
                        Some(s) => Some(weights.get(s).f32_vector("attention sinks")?),
                        None => None,
                    };
                    attention::attend(&mut rec, &step, buf(q), layer, sinks, y, &params, t)?;
                }
                Op::Swiglu { gate, up } => swiglu::record(&mut rec, buf(gate), buf(up), y, n)?,
                Op::Geglu { gate, up } => geglu::record(&mut rec, buf(gate), buf(up), y, n)?,
                Op::Reglu { gate, up } => reglu::record(&mut rec, buf(gate), buf(up), y, n)?,
                Op::SwigluOai {
                    gate,
                    up,
                    alpha,
                    limit,
                } => swiglu_oai::record(&mut rec, buf(gate), buf(up), alpha, limit, y, n)?,
                Op::Activation { x, act } => activation::record(&mut rec, buf(x), act, y, n)?,
                Op::Softcap { x, cap } => softcap::record(&mut rec, buf(x), cap, y, n)?,
                Op::MoeRoute { logits, params } => {
                    let bias = match params.selection_bias {
                        Some(b) => Some(weights.get(b).f32_vector("expert selection bias")?),
                        None => None,
                    };
                    let ln = graph.node(logits).ne;
                    moe_route::record(&mut rec, buf(logits), bias, y, ln[0], ln[1], &params)?
                }
                Op::MulMatId { w, x, route } => {
                    let gw = weights.get(w);
                    let n_x = graph.node(x).n_elements();
                    let rounded =
                        round_activations(&mut rec, &acts, &mut acts_of, gw, x, buf(x), n_x)?;
                    let input = if rounded { &acts } else { buf(x) };
                    let shape = mul_mat_id::MulMatIdShape {
                        m: node.ne[0],
                        n_used: node.ne[1],
                        n_tokens: node.ne[2],
                        shared_x: graph.node(x).ne[1] == 1,
                    };
                    mul_mat_id::record(&mut rec, gw, input, buf(route), y, &shape)?
                }
                Op::AddId { x, bias, route } => {
                    let bias = weights.get(bias).f32_vector("expert biases")?;
                    let (m, n_used) = (node.ne[0], node.ne[1]);
                    add_id::record(&mut rec, buf(x), bias, buf(route), m, n_used, y, n)?
                }
                Op::MoeSum { x, route } => {
                    let n_used = graph.node(x).ne[1];
                    moe_sum::record(&mut rec, buf(x), buf(route), node.ne[0], n_used, y, n)?
                }
                Op::Slice { x, offset, len } => {
                    let width = graph.node(x).ne[0];
                    slice::record(&mut rec, buf(x), width, offset, len, y, n)?
                }
                Op::OutputRows { x } => {
                    output_rows::record(&mut rec, &step, buf(x), y, node.ne[0], t, n_out)?
                }
            }
        }
        let dispatches = rec.finish()?;

        let out_node = graph.node(graph.output);
        let output = slots[plan.slot_of[graph.output.0 as usize]].clone();
        let output_floats = out_node.n_elements();
        let read = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        let staging = gpu.buffer("result staging", (output_floats * 4) as u64, read, false)?;
        let ids = gpu.buffer(
            "sampled ids",
            (n_out.max(1) * 4) as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            false,
        )?;
        let ids_staging = gpu.buffer(
            "sampled ids staging",
            (n_out.max(1) * 4) as u64,
            read,
            false,
        )?;
        let mut rec = Recorder::new(gpu);
        let width = out_node.ne[0];
        sample::argmax(&mut rec, &output, &ids, width, output_floats / width.max(1))?;
        let argmax = rec.finish()?;
        let spec = gpu.buffer(
            "sampling spec",
            ((sample::SPEC_HEADER + 2 * sample::SPEC_EDITS) * 4) as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            false,
        )?;
        let chain_result = gpu.buffer(
            "sampled token",
            8,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            false,
        )?;
        let chain_staging = gpu.buffer("sampled token staging", 8, read, false)?;
        let chain_work = gpu.buffer(
            "sampling scratch",
            (3 * width.max(1) * 4) as u64,
            wgpu::BufferUsages::STORAGE,
            false,
        )?;
        let mut rec = Recorder::new(gpu);
        let rows = output_floats / width.max(1);
        sample::sample_chain(
            &mut rec,
            &output,
            &spec,
            &chain_result,
            &chain_work,
            width,
            rows.saturating_sub(1),
        )?;
        let chain = rec.finish()?;
        Ok(Recording {
            graph: graph.clone(),
            step,
            dispatches,
            output,
            output_floats,
            staging,
            argmax,
            ids,
            ids_staging,
            chain,
            spec,
            chain_result,
            chain_staging,
            _chain_work: chain_work,
            n_outputs: n_out,
            n_tokens: t,
        })
    }

    /// Times the step's dispatches, then those of `tail` (sampling), one by one when the
    /// device is profiled (`profile`).
    fn profile(&self, gpu: &Gpu, tail: &[Dispatch]) -> Result<(), WgpuError> {
        match gpu.profile() {
            Some(p) => {
                p.time(gpu, &self.dispatches)?;
                p.time(gpu, tail)
            }
            None => Ok(()),
        }
    }

    pub fn records(&self, graph: &Graph) -> bool {
        self.graph == *graph
    }

    fn write_step(&self, gpu: &Gpu, batch: &Batch) -> Result<(), WgpuError> {
        if batch.tokens.len() != self.n_tokens || batch.output_rows.len() != self.n_outputs {
            return Err(WgpuError::Unsupported(
                "batch does not match the recording".into(),
            ));
        }
        let [segment] = batch.segments else {
            return Err(WgpuError::Unsupported(
                "a batch of several sequences".into(),
            ));
        };
        let mut words = Vec::with_capacity(4 + self.n_tokens + self.n_outputs);
        words.extend_from_slice(&[
            segment.pos0 as u32,
            self.n_tokens as u32,
            self.n_outputs as u32,
            0,
        ]);
        words.extend_from_slice(batch.tokens);
        words.extend(batch.output_rows.iter().map(|&r| r as u32));
        gpu.queue
            .write_buffer(&self.step, 0, bytemuck::cast_slice(&words));
        Ok(())
    }

    /// Runs one step and reads the output (`n_outputs` rows) into `out`.
    pub fn run(&self, gpu: &Gpu, batch: &Batch, out: &mut [f32]) -> Result<(), WgpuError> {
        let (staging, n) = self.submit(gpu, batch, &Readout::Logits, out.len())?;
        gpu.read_back(staging, &mut out[..n])
    }

    /// Runs one step and reads back only the greedy token id of each output row.
    pub fn run_argmax(&self, gpu: &Gpu, batch: &Batch, ids: &mut [u32]) -> Result<(), WgpuError> {
        let (staging, n) = self.submit(gpu, batch, &Readout::Greedy, ids.len())?;
        gpu.read_back(staging, &mut ids[..n])
    }

    /// Runs one step and samples its last output row with the spec words `spec`
    /// (`ops::sample::spec_words`): reads back (status, token).
    pub fn run_sampled(
        &self,
        gpu: &Gpu,
        batch: &Batch,
        spec: &[u32],
    ) -> Result<[u32; 2], WgpuError> {
        let (staging, _) = self.submit(gpu, batch, &Readout::Sampled(spec.to_vec()), 2)?;
        let mut out = [0u32; 2];
        gpu.read_back(staging, &mut out)?;
        Ok(out)
    }

    /// Submits one step (the waiting forms above, and the browser's asynchronous read-back):
    /// the step's dispatches, then what `readout` asks for; the first `n` result words
    /// (floats, ids, or status and token) are copied into the returned staging buffer, which
    /// the caller maps ([`Gpu::read_back`], or [`Gpu::start_read_back`] asynchronously).
    /// Returns the buffer and the words it will hold.
    pub fn submit(
        &self,
        gpu: &Gpu,
        batch: &Batch,
        readout: &Readout,
        n: usize,
    ) -> Result<(&wgpu::Buffer, usize), WgpuError> {
        if matches!(readout, Readout::Sampled(_)) && self.n_outputs == 0 {
            return Err(WgpuError::Unsupported(
                "sampling a graph without outputs".into(),
            ));
        }
        self.write_step(gpu, batch)?;
        let tail: &[Dispatch] = match readout {
            Readout::Logits => &[],
            Readout::Greedy => &self.argmax,
            Readout::Sampled(spec) => {
                gpu.queue
                    .write_buffer(&self.spec, 0, bytemuck::cast_slice(spec));
                &self.chain
            }
        };
        self.profile(gpu, tail)?;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        encode(&mut encoder, &self.dispatches);
        if !tail.is_empty() {
            encode(&mut encoder, tail);
        }
        let (src, staging, n) = match readout {
            Readout::Logits => (&self.output, &self.staging, n.min(self.output_floats)),
            Readout::Greedy => (&self.ids, &self.ids_staging, n.min(self.n_outputs)),
            Readout::Sampled(_) => (&self.chain_result, &self.chain_staging, n.min(2)),
        };
        if n > 0 {
            encoder.copy_buffer_to_buffer(src, 0, staging, 0, (n * 4) as u64);
        }
        gpu.queue.submit([encoder.finish()]);
        Ok((staging, n))
    }
}

/// Rounds the matmul input `x` (`n_x` floats in `x_buf`) into the scratch `acts` as ggml's CPU
/// backend quantizes activations for weights like `w`; false where they stay f32. `x` stays
/// unchanged while it is live, so its rounding is reused by every matmul on it until another
/// input or format needs the scratch (`acts_of` says what it holds).
#[allow(clippy::too_many_arguments)]
fn round_activations(
    rec: &mut Recorder,
    acts: &wgpu::Buffer,
    acts_of: &mut Option<(usize, &'static str)>,
    w: &crate::weights::GpuWeight,
    x: NodeId,
    x_buf: &wgpu::Buffer,
    n_x: usize,
) -> Result<bool, WgpuError> {
    let Some((define, block)) = act_rounding(w.ty) else {
        return Ok(false);
    };
    if *acts_of != Some((x.0 as usize, define)) {
        quantize::record(rec, define, block, x_buf, acts, n_x)?;
        *acts_of = Some((x.0 as usize, define));
    }
    Ok(true)
}
