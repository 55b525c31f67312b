//! A graph recorded for the GPU: buffers planned once per graph shape (the CPU backend's
//! liveness plan, so a forward pass needs a handful of activation buffers), every node's
//! dispatches recorded, and a staging buffer for the result. A step writes the step buffer
//! (token ids, positions, output rows), encodes the recording into one command buffer and
//! submits it once; only the result is read back.

use std::time::Instant;

use tessera_core::backend::Batch;
use tessera_core::graph::Graph;
use tessera_core::plan::Plan;
use tessera_gpu::graph_walk::{
    activations_alloc_len, activations_len, record_nodes, uniform_activations, GraphBuffers,
};
use tessera_gpu::kv::GpuKv;
use tessera_gpu::ops::sample;
use tessera_gpu::readout::Readout;
use tessera_gpu::recorder::Recorder;
use tessera_gpu::weights::GpuWeights;

use crate::device::Gpu;
use crate::dispatch::{bind, encode, Dispatch};
use crate::error::WgpuError;

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
        weights: &GpuWeights<wgpu::Buffer>,
        kv: &GpuKv<wgpu::Buffer>,
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
        let act_len = activations_len(graph);
        let acts_uniform = uniform_activations(gpu, graph, act_len);
        let acts_usage = match acts_uniform {
            Some(_) => storage | wgpu::BufferUsages::UNIFORM,
            None => storage,
        };
        let acts = gpu.buffer(
            "rounded activations",
            (activations_alloc_len(act_len, acts_uniform) * 4) as u64,
            acts_usage,
            false,
        )?;
        let mut rec = Recorder::new(gpu);
        let buffers = GraphBuffers {
            plan: &plan,
            slots: &slots,
            step: &step,
            acts: &acts,
            acts_uniform,
        };
        record_nodes(&mut rec, graph, &buffers, weights, kv)?;
        let dispatches = bind(rec)?;

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
        let argmax = bind(rec)?;
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
        let chain = bind(rec)?;
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

    /// Times the step's dispatches, then those of `tail` (sampling), each run alone in its
    /// own submission waited for, when the device is profiled (`profile`).
    fn profile(&self, gpu: &Gpu, tail: &[Dispatch]) -> Result<(), WgpuError> {
        let Some(profile) = gpu.profile() else {
            return Ok(());
        };
        for d in self.dispatches.iter().chain(tail) {
            let start = Instant::now();
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            encode(&mut encoder, std::slice::from_ref(d));
            gpu.queue.submit([encoder.finish()]);
            gpu.wait()?;
            profile.add(&d.kernel, start.elapsed());
        }
        Ok(())
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
