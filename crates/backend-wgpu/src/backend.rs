//! `WgpuBackend`: the engine's [`Backend`] on a WebGPU device.

use std::task::Poll;

use tessera_core::backend::{check_single_step, Backend, Batch, KvLayout, Segment};
use tessera_core::graph::Graph;
use tessera_core::sampling::{device_result, DeviceSampling, SamplingError};
use tessera_core::weights::WeightStore;
use tessera_core::EngineError;

use tessera_gpu::kv::GpuKv;
use tessera_gpu::ops::kv::shift_keys;
use tessera_gpu::ops::sample::spec_words;
use tessera_gpu::readout::Readout;
use tessera_gpu::recorder::Recorder;
use tessera_gpu::weights::{source_of, GpuWeights};

use crate::device::Gpu;
use crate::dispatch::{bind, encode};
use crate::error::WgpuError;
use crate::recording::Recording;
use crate::{kv, weights};

/// Recordings kept (decode, prefill, the last partial micro-batch, all-logits...).
const RECORDINGS: usize = 4;

pub struct WgpuBackend {
    gpu: Gpu,
    weights: Option<GpuWeights<wgpu::Buffer>>,
    kv: GpuKv<wgpu::Buffer>,
    recordings: Vec<Recording>,
    /// Steps answer `Poll::Pending` after submitting (the browser's mode).
    async_read_back: bool,
    pending: Option<PendingStep>,
}

/// A step submitted in asynchronous read-back mode whose result has not been taken yet.
struct PendingStep {
    key: StepKey,
    staging: wgpu::Buffer,
    /// Result words the staging buffer holds.
    n: usize,
}

/// What identifies a step: the repeated call must be the same one (an equal graph too).
#[derive(PartialEq)]
struct StepKey {
    graph: Graph,
    segments: Vec<Segment>,
    tokens: Vec<u32>,
    output_rows: Vec<usize>,
    readout: Readout,
    n: usize,
}

impl WgpuBackend {
    /// Opens the default adapter (blocking; native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<WgpuBackend, WgpuError> {
        Ok(WgpuBackend::with_gpu(pollster::block_on(Gpu::new())?))
    }

    pub fn with_gpu(gpu: Gpu) -> WgpuBackend {
        WgpuBackend {
            gpu,
            weights: None,
            kv: GpuKv::default(),
            recordings: Vec::new(),
            async_read_back: false,
            pending: None,
        }
    }

    /// Asynchronous read-back (required in a browser, where a buffer map completes only on
    /// the JS event loop): `compute`, `compute_greedy` and `compute_sampled` submit the step,
    /// start mapping its result and answer `Poll::Pending`; once
    /// [`Gpu::read_back_signal`]'s future is ready, the same call again returns the result.
    /// Natively the default (off) waits for each step.
    pub fn set_async_read_back(&mut self, on: bool) {
        self.drop_pending();
        self.async_read_back = on;
    }

    fn drop_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            self.gpu.drop_read_back(&p.staging);
        }
    }

    /// The asynchronous form of a step (see [`WgpuBackend::set_async_read_back`]).
    fn async_step<T: bytemuck::Pod>(
        &mut self,
        i: usize,
        graph: &Graph,
        batch: &Batch,
        readout: Readout,
        dst: &mut [T],
    ) -> Result<Poll<()>, EngineError> {
        let key = StepKey {
            graph: graph.clone(),
            segments: batch.segments.to_vec(),
            tokens: batch.tokens.to_vec(),
            output_rows: batch.output_rows.to_vec(),
            readout,
            n: dst.len(),
        };
        if let Some(p) = self.pending.take() {
            if p.key == key {
                if !self.gpu.read_back_signal().is_ready() {
                    self.pending = Some(p);
                    return Ok(Poll::Pending);
                }
                self.gpu.finish_read_back(&p.staging, &mut dst[..p.n])?;
                return Ok(Poll::Ready(()));
            }
            // Another step than the one in flight: its caller went away (a cancelled
            // generation). Its KV writes are harmless: they were at uncommitted positions.
            self.gpu.drop_read_back(&p.staging);
        }
        let (staging, n) = self.recordings[i].submit(&self.gpu, batch, &key.readout, dst.len())?;
        let staging = staging.clone();
        self.gpu.start_read_back(&staging, (n * 4) as u64);
        self.pending = Some(PendingStep { key, staging, n });
        Ok(Poll::Pending)
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Uploads the model's weights (done by the first `compute` otherwise).
    pub fn upload_weights(&mut self, store: &WeightStore) -> Result<(), WgpuError> {
        if self.weights.as_ref().map(|w| w.source) != Some(source_of(store)) {
            self.recordings.clear();
            self.weights = None;
            self.weights = Some(weights::upload_all(&self.gpu, store)?);
        }
        Ok(())
    }

    /// Takes weights already on this backend's device for `store` (a [`crate::WeightStream`]'s,
    /// made from the same headers), so the first step uploads nothing.
    pub fn set_weights(&mut self, weights: GpuWeights<wgpu::Buffer>) {
        self.recordings.clear();
        self.weights = Some(weights);
    }

    /// Bytes of weights on the GPU.
    pub fn weight_bytes(&self) -> usize {
        self.weights.as_ref().map_or(0, |w| w.bytes)
    }

    /// The recording for `graph`, made on first use.
    fn recording(&mut self, graph: &Graph, weights: &WeightStore) -> Result<usize, EngineError> {
        self.upload_weights(weights)?;
        let i = match self.recordings.iter().position(|r| r.records(graph)) {
            Some(i) => i,
            None => {
                let gw = self.weights.as_ref().expect("uploaded above");
                let r = Recording::new(&self.gpu, graph, gw, &self.kv)?;
                if self.recordings.len() == RECORDINGS {
                    self.recordings.remove(0);
                }
                self.recordings.push(r);
                self.recordings.len() - 1
            }
        };
        Ok(i)
    }
}

impl Backend for WgpuBackend {
    fn name(&self) -> &'static str {
        "wgpu"
    }

    /// One sequence only: the recordings bind the one cache's buffers.
    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        if layout.n_seq > 1 {
            return Err(EngineError::NotSupported(format!(
                "a KV cache of {} sequences on the WebGPU backend (one context per sequence)",
                layout.n_seq
            )));
        }
        self.drop_pending();
        self.recordings.clear();
        self.kv = GpuKv::default();
        self.kv = kv::allocate(&self.gpu, layout)?;
        Ok(())
    }

    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        check_single_step(self, graph, batch, weights, false)?;
        let i = self.recording(graph, weights)?;
        if self.async_read_back {
            return self.async_step(i, graph, batch, Readout::Logits, out);
        }
        self.recordings[i].run(&self.gpu, batch, out)?;
        Ok(Poll::Ready(()))
    }

    /// Greedy sampling on the GPU: only the id of each output row's largest logit is read
    /// back (4 bytes per row instead of the vocabulary).
    fn compute_greedy(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        ids: &mut [u32],
    ) -> Result<Poll<()>, EngineError> {
        check_single_step(self, graph, batch, weights, false)?;
        let i = self.recording(graph, weights)?;
        if self.async_read_back {
            return self.async_step(i, graph, batch, Readout::Greedy, ids);
        }
        self.recordings[i].run_argmax(&self.gpu, batch, ids)?;
        Ok(Poll::Ready(()))
    }

    /// The engine's sampling chain on the GPU (`sample_chain.wgsl`): only (status, token)
    /// is read back. A step with more logit edits than the spec holds is left to the CPU.
    fn picks_on_device(&self) -> bool {
        true
    }

    fn compute_sampled(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        step: &DeviceSampling,
    ) -> Result<Poll<Option<Result<u32, SamplingError>>>, EngineError> {
        let Some(spec) = spec_words(step) else {
            return Ok(Poll::Ready(None));
        };
        check_single_step(self, graph, batch, weights, true)?;
        let i = self.recording(graph, weights)?;
        let outcome = if self.async_read_back {
            let mut out = [0u32; 2];
            if self
                .async_step(i, graph, batch, Readout::Sampled(spec), &mut out)?
                .is_pending()
            {
                return Ok(Poll::Pending);
            }
            out
        } else {
            self.recordings[i].run_sampled(&self.gpu, batch, &spec)?
        };
        let [status, token] = outcome;
        Ok(Poll::Ready(Some(device_result(status, token))))
    }

    fn kv_n_ctx(&self) -> usize {
        self.kv.n_ctx
    }

    fn kv_shift_checked(
        &mut self,
        weights: &WeightStore,
        _seq: usize,
        n_past: usize,
        n_keep: usize,
        n_discard: usize,
    ) -> Result<(), EngineError> {
        let n_moved = n_past - n_keep - n_discard;
        if n_moved == 0 || n_discard == 0 {
            return Ok(());
        }
        let needs_weights = self
            .kv
            .layers
            .iter()
            .any(|l| l.layout.rope.freq_factors.is_some());
        if needs_weights {
            self.upload_weights(weights)?;
        }
        let gpu = &self.gpu;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        let mut rec = Recorder::new(gpu);
        let mut temps = Vec::new();
        for layer in &self.kv.layers {
            let (kp, vp) = (layer.k_pairs() as u64 * 4, layer.v_pairs() as u64 * 4);
            let usage = wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST;
            let moved_k = gpu.buffer("kv shift K", n_moved as u64 * kp, usage, false)?;
            let moved_v = gpu.buffer("kv shift V", n_moved as u64 * vp, usage, false)?;
            let src = (n_keep + n_discard) as u64;
            encoder.copy_buffer_to_buffer(&layer.k, src * kp, &moved_k, 0, n_moved as u64 * kp);
            encoder.copy_buffer_to_buffer(&layer.v, src * vp, &moved_v, 0, n_moved as u64 * vp);
            let factors = match layer.layout.rope.freq_factors {
                Some(f) => {
                    let gw = self.weights.as_ref().expect("uploaded above");
                    let factors = gw.get(f).f32_vector("rope frequency factors");
                    Some(factors.map_err(WgpuError::from)?)
                }
                None => None,
            };
            shift_keys(
                &mut rec,
                &moved_k,
                layer,
                n_moved,
                n_keep,
                -(n_discard as f32),
                factors,
            )
            .map_err(WgpuError::from)?;
            temps.push((moved_k, moved_v, n_keep as u64 * vp, n_moved as u64 * vp));
        }
        let dispatches = bind(rec)?;
        encode(&mut encoder, &dispatches);
        for (layer, (_, moved_v, at, len)) in self.kv.layers.iter().zip(&temps) {
            encoder.copy_buffer_to_buffer(moved_v, 0, &layer.v, *at, *len);
        }
        gpu.queue.submit([encoder.finish()]);
        gpu.wait()?;
        Ok(())
    }
}
