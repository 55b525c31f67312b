//! `VulkanBackend`: the engine's [`Backend`] on a Vulkan device, with the GPU layer's
//! kernels and graph walk (`tessera_gpu`, shared with the WebGPU backend). Weights live in device-local buffers (uploaded through staging),
//! split by rows where a tensor exceeds the device's largest storage binding.

use std::task::Poll;

use ash::vk;
use tessera_core::backend::{check_single_step, Backend, Batch, KvLayout};
use tessera_core::graph::Graph;
use tessera_core::sampling::device_result;
use tessera_core::sampling::{DeviceSampling, SamplingError};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::EngineError;
use tessera_gpu::kv::GpuKv;
use tessera_gpu::ops::kv::shift_keys;
use tessera_gpu::ops::sample::spec_words;
use tessera_gpu::readout::Readout;
use tessera_gpu::recorder::Recorder;
use tessera_gpu::weights::{source_of, GpuWeight, GpuWeights};

use crate::buffer::{Buffer, Memory};
use crate::error::VulkanError;
use crate::gpu::{barrier, Gpu};
use crate::recording::Recording;
use crate::target::Dispatches;

/// Recordings kept (decode, prefill, the last partial micro-batch, all-logits...).
const RECORDINGS: usize = 4;

pub struct VulkanBackend {
    gpu: Gpu,
    weights: Option<GpuWeights<Buffer>>,
    kv: GpuKv<Buffer>,
    recordings: Vec<Recording>,
}

impl VulkanBackend {
    /// Opens device `index` of `tessera devices`' Vulkan list (`None`: the default choice).
    pub fn new(index: Option<usize>) -> Result<VulkanBackend, VulkanError> {
        Ok(VulkanBackend::with_gpu(Gpu::new(index)?))
    }

    pub fn with_gpu(gpu: Gpu) -> VulkanBackend {
        VulkanBackend {
            gpu,
            weights: None,
            kv: GpuKv::default(),
            recordings: Vec::new(),
        }
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Uploads the model's weights (done by the first `compute` otherwise).
    pub fn upload_weights(&mut self, store: &WeightStore) -> Result<(), VulkanError> {
        if self.weights.as_ref().map(|w| w.source) == Some(source_of(store)) {
            return Ok(());
        }
        self.recordings.clear();
        self.weights = None;
        if !store.has_bytes() {
            return Err(VulkanError::Unsupported(
                "the model's weights are not in memory".into(),
            ));
        }
        let limit = self.gpu.max_weight_binding();
        let mut weights = Vec::with_capacity(store.len());
        for i in 0..store.len() {
            let id = WeightId(i as u32);
            let (d, name, bytes) = (store.desc(id), &store.get(id).name, store.bytes(id));
            let n_rows = d.n_rows();
            let row_bytes = bytes.len() / n_rows.max(1);
            let max_rows = GpuWeight::<Buffer>::rows_per_binding(limit, name, d.ty, row_bytes)?;
            let w = GpuWeight::split(d.ty, d.ne[0], n_rows, row_bytes, max_rows, |size| {
                Buffer::new(&self.gpu, name, size, Memory::Device)
            })?;
            for part in &w.parts {
                let src = &bytes[part.row0 * row_bytes..(part.row0 + part.rows) * row_bytes];
                part.buffer.upload(&self.gpu, 0, src)?;
            }
            weights.push(w);
        }
        self.weights = Some(GpuWeights {
            source: source_of(store),
            weights,
            bytes: store.total_bytes(),
        });
        Ok(())
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        self.weights.as_ref().map_or(0, |w| w.bytes)
    }

    /// The recording for `graph`, made on first use.
    fn recording(&mut self, graph: &Graph, weights: &WeightStore) -> Result<usize, VulkanError> {
        self.upload_weights(weights)?;
        if let Some(i) = self.recordings.iter().position(|r| r.records(graph)) {
            return Ok(i);
        }
        let gw = self.weights.as_ref().expect("uploaded above");
        let r = Recording::new(&self.gpu, graph, gw, &self.kv)?;
        if self.recordings.len() == RECORDINGS {
            self.recordings.remove(0);
        }
        self.recordings.push(r);
        Ok(self.recordings.len() - 1)
    }

    fn step<T: bytemuck::Pod>(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        readout: &Readout,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let sampled = matches!(readout, Readout::Sampled(_));
        check_single_step(self, graph, batch, weights, sampled)?;
        let i = self.recording(graph, weights)?;
        self.recordings[i].run(&self.gpu, batch, readout, out)?;
        Ok(())
    }
}

impl Backend for VulkanBackend {
    fn name(&self) -> &'static str {
        "vulkan"
    }

    /// One sequence only: the recordings bind the one cache's buffers.
    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        if layout.n_seq > 1 {
            return Err(EngineError::NotSupported(format!(
                "a KV cache of {} sequences on the Vulkan backend (one context per sequence)",
                layout.n_seq
            )));
        }
        self.recordings.clear();
        self.kv = GpuKv::default();
        let gpu = &self.gpu;
        self.kv = GpuKv::with_buffers(layout, |name, bytes| {
            Buffer::new(gpu, name, bytes, Memory::Device)
        })?;
        Ok(())
    }

    fn kv_n_ctx(&self) -> usize {
        self.kv.n_ctx
    }

    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        self.step(graph, batch, weights, &Readout::Logits, out)?;
        Ok(Poll::Ready(()))
    }

    /// Greedy sampling on the device: only each output row's id is read back.
    fn compute_greedy(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        ids: &mut [u32],
    ) -> Result<Poll<()>, EngineError> {
        self.step(graph, batch, weights, &Readout::Greedy, ids)?;
        Ok(Poll::Ready(()))
    }

    fn picks_on_device(&self) -> bool {
        true
    }

    /// The engine's sampling chain on the device (`sample_chain.wgsl`): only (status, token)
    /// is read back. A step with more logit edits than the spec holds is left to the CPU.
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
        let mut out = [0u32; 2];
        self.step(graph, batch, weights, &Readout::Sampled(spec), &mut out)?;
        Ok(Poll::Ready(Some(device_result(out[0], out[1]))))
    }

    /// Moves the kept positions down and re-rotates their keys (`kv.wgsl`'s `shift`), as the
    /// WebGPU backend does: copy the moved K and V out, rotate K back in, copy V back.
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
        if self
            .kv
            .layers
            .iter()
            .any(|l| l.layout.rope.freq_factors.is_some())
        {
            self.upload_weights(weights)?;
        }
        let gpu = &self.gpu;
        let mut rec = Recorder::new(gpu);
        let mut copies = Vec::new();
        for layer in &self.kv.layers {
            let (kp, vp) = (layer.k_pairs() * 4, layer.v_pairs() * 4);
            let moved_k = Buffer::new(gpu, "kv shift K", (n_moved * kp) as u64, Memory::Device)?;
            let moved_v = Buffer::new(gpu, "kv shift V", (n_moved * vp) as u64, Memory::Device)?;
            let factors = match layer.layout.rope.freq_factors {
                Some(f) => {
                    let gw = self.weights.as_ref().expect("uploaded above");
                    Some(
                        gw.get(f)
                            .f32_vector("rope frequency factors")
                            .map_err(VulkanError::from_kernel)?,
                    )
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
            .map_err(VulkanError::from_kernel)?;
            let src = (n_keep + n_discard) as u64;
            let out_k = vk::BufferCopy {
                src_offset: src * kp as u64,
                dst_offset: 0,
                size: (n_moved * kp) as u64,
            };
            let out_v = vk::BufferCopy {
                src_offset: src * vp as u64,
                dst_offset: 0,
                size: (n_moved * vp) as u64,
            };
            let back_v = vk::BufferCopy {
                src_offset: 0,
                dst_offset: (n_keep * vp) as u64,
                size: (n_moved * vp) as u64,
            };
            copies.push((
                layer.k.clone(),
                layer.v.clone(),
                moved_k,
                moved_v,
                out_k,
                out_v,
                back_v,
            ));
        }
        let shift = Dispatches::bind(rec)?;
        let d = &gpu.inner.device;
        gpu.submit_and_wait(|_, cb| {
            // SAFETY: every buffer is alive until the submission is waited for; the regions
            // lie inside them (positions below the cache's n_ctx, checked by `kv_shift`).
            unsafe {
                for (k, v, mk, mv, ok, ov, _) in &copies {
                    d.cmd_copy_buffer(cb, k.raw(), mk.raw(), &[*ok]);
                    d.cmd_copy_buffer(cb, v.raw(), mv.raw(), &[*ov]);
                }
                barrier(d, cb);
                shift.encode(d, cb);
                for (_, v, _, mv, _, _, bv) in &copies {
                    d.cmd_copy_buffer(cb, mv.raw(), v.raw(), &[*bv]);
                }
                barrier(d, cb);
            }
        })?;
        Ok(())
    }
}
