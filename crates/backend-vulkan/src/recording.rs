//! A graph recorded for the Vulkan device, once per graph shape: the planner's activation
//! slots, the step inputs, the shared graph walk's dispatches bound to descriptor sets, and
//! the three read-outs (logits, greedy ids, a sampled token). A step writes the step inputs
//! (host-visible), records one command buffer, submits it, waits, and reads back only what
//! was asked for.

use ash::vk;
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

use crate::buffer::{Buffer, Memory};
use crate::error::VulkanError;
use crate::gpu::{barrier, Gpu};
use crate::target::Dispatches;

pub struct Recording {
    graph: Graph,
    step: Buffer,
    dispatches: Dispatches,
    output: Buffer,
    output_floats: usize,
    argmax: Dispatches,
    ids: Buffer,
    chain: Dispatches,
    spec: Buffer,
    chain_result: Buffer,
    /// Host-visible: where every read-out is copied.
    staging: Buffer,
    /// Kept alive for the descriptor sets that bind them.
    _buffers: Vec<Buffer>,
    n_outputs: usize,
}

fn device(gpu: &Gpu, what: &str, bytes: usize) -> Result<Buffer, VulkanError> {
    Buffer::new(gpu, what, bytes as u64, Memory::Device)
}

impl Recording {
    pub fn new(
        gpu: &Gpu,
        graph: &Graph,
        weights: &GpuWeights<Buffer>,
        kv: &GpuKv<Buffer>,
    ) -> Result<Recording, VulkanError> {
        let plan = Plan::new(graph);
        let mut slots = Vec::with_capacity(plan.slot_len.len());
        for (i, &len) in plan.slot_len.iter().enumerate() {
            slots.push(device(gpu, &format!("activation slot {i}"), len * 4)?);
        }
        let (t, n_out) = (graph.n_tokens, graph.n_outputs);
        let step = Buffer::new(
            gpu,
            "step inputs",
            ((4 + t + n_out) * 4) as u64,
            Memory::Host,
        )?;
        let act_len = activations_len(graph);
        let acts_uniform = uniform_activations(gpu, graph, act_len);
        let acts_len = activations_alloc_len(act_len, acts_uniform);
        let acts = device(gpu, "rounded activations", acts_len * 4)?;
        let mut rec = Recorder::new(gpu);
        let buffers = GraphBuffers {
            plan: &plan,
            slots: &slots,
            step: &step,
            acts: &acts,
            acts_uniform,
        };
        record_nodes(&mut rec, graph, &buffers, weights, kv).map_err(VulkanError::from_kernel)?;
        let dispatches = Dispatches::bind(rec)?;

        let output = slots[plan.slot_of[graph.output.0 as usize]].clone();
        let output_floats = graph.node(graph.output).n_elements();
        let width = graph.node(graph.output).ne[0].max(1);
        let rows = output_floats / width;
        let ids = device(gpu, "sampled ids", n_out.max(1) * 4)?;
        let mut rec = Recorder::new(gpu);
        sample::argmax(&mut rec, &output, &ids, width, rows).map_err(VulkanError::from_kernel)?;
        let argmax = Dispatches::bind(rec)?;
        let spec_words = sample::SPEC_HEADER + 2 * sample::SPEC_EDITS;
        let spec = Buffer::new(gpu, "sampling spec", (spec_words * 4) as u64, Memory::Host)?;
        let chain_result = device(gpu, "sampled token", 8)?;
        let chain_work = device(gpu, "sampling scratch", 3 * width * 4)?;
        let mut rec = Recorder::new(gpu);
        let last = rows.saturating_sub(1);
        sample::sample_chain(
            &mut rec,
            &output,
            &spec,
            &chain_result,
            &chain_work,
            width,
            last,
        )
        .map_err(VulkanError::from_kernel)?;
        let chain = Dispatches::bind(rec)?;
        let staging = Buffer::new(
            gpu,
            "result staging",
            (output_floats.max(2) * 4) as u64,
            Memory::Host,
        )?;
        lock_save(gpu);
        slots.extend([acts, chain_work]);
        Ok(Recording {
            graph: graph.clone(),
            step,
            dispatches,
            output,
            output_floats,
            argmax,
            ids,
            chain,
            spec,
            chain_result,
            staging,
            _buffers: slots,
            n_outputs: n_out,
        })
    }

    pub fn records(&self, graph: &Graph) -> bool {
        self.graph == *graph
    }

    /// Runs one step and reads back the first `out.len()` words of what `readout` asks for
    /// (floats of the output rows, ids, or (status, token)).
    pub fn run<T: bytemuck::Pod>(
        &self,
        gpu: &Gpu,
        batch: &Batch,
        readout: &Readout,
        out: &mut [T],
    ) -> Result<(), VulkanError> {
        let [segment] = batch.segments else {
            return Err(VulkanError::Unsupported(
                "a batch of several sequences".into(),
            ));
        };
        if batch.tokens.len() != self.graph.n_tokens || batch.output_rows.len() != self.n_outputs {
            return Err(VulkanError::Unsupported(
                "batch does not match the recording".into(),
            ));
        }
        let mut words = vec![
            segment.pos0 as u32,
            batch.tokens.len() as u32,
            self.n_outputs as u32,
            0,
        ];
        words.extend_from_slice(batch.tokens);
        words.extend(batch.output_rows.iter().map(|&r| r as u32));
        self.step.write(0, bytemuck::cast_slice(&words));
        let (tail, src, limit) = match readout {
            Readout::Logits => (None, &self.output, self.output_floats),
            Readout::Greedy => (Some(&self.argmax), &self.ids, self.n_outputs),
            Readout::Sampled(spec) => {
                if self.n_outputs == 0 {
                    return Err(VulkanError::Unsupported(
                        "sampling a graph without outputs".into(),
                    ));
                }
                self.spec.write(0, bytemuck::cast_slice(spec));
                (Some(&self.chain), &self.chain_result, 2)
            }
        };
        let n = out.len().min(limit);
        let bytes = (n * 4) as u64;
        let d = &gpu.inner.device;
        gpu.submit_and_wait(|d2, cb| {
            self.dispatches.encode(d2, cb);
            if let Some(tail) = tail {
                tail.encode(d2, cb);
            }
            if bytes > 0 {
                let region = [vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size: bytes,
                }];
                // SAFETY: both buffers are alive and large enough (`limit` words).
                unsafe { d.cmd_copy_buffer(cb, src.raw(), self.staging.raw(), &region) };
                barrier(d, cb);
            }
        })?;
        self.staging.read(bytemuck::cast_slice_mut(&mut out[..n]));
        Ok(())
    }
}

/// Saves the pipeline cache after a recording compiled new kernels.
fn lock_save(gpu: &Gpu) {
    crate::gpu::lock(&gpu.inner.pipelines).save(&gpu.inner.device);
}
