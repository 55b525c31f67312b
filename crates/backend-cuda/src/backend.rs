//! `CudaBackend`: the engine's [`Backend`] on a CUDA device, structured like the WebGPU
//! backend: weights uploaded once, a prepared [`StepGraph`] per graph shape, sampling on the
//! device so a decode step reads back a token id.

use std::task::Poll;

use tessera_core::backend::{check_single_step, Backend, Batch, KvLayout};
use tessera_core::graph::Graph;
use tessera_core::sampling::{device_result, DeviceSampling, SamplingError};
use tessera_core::weights::WeightStore;
use tessera_core::EngineError;

use crate::device::{Gpu, Queue};
use crate::error::CudaError;
use crate::kv::CudaKv;
use crate::ops::attention;
use crate::step::{Readout, StepGraph};
use crate::weights::{source_of, CudaWeights};

/// Prepared graphs kept (decode, prefill, the last partial micro-batch, all-logits...).
const STEP_GRAPHS: usize = 4;

pub struct CudaBackend {
    gpu: Gpu,
    weights: Option<CudaWeights>,
    kv: CudaKv,
    steps: Vec<StepGraph>,
}

impl CudaBackend {
    /// Opens device `ordinal`: [`CudaError::NoDriver`] without a driver, [`CudaError::NoNvrtc`]
    /// when its kernels cannot be compiled.
    pub fn new(ordinal: usize) -> Result<CudaBackend, CudaError> {
        Ok(CudaBackend {
            gpu: Gpu::new(ordinal)?,
            weights: None,
            kv: CudaKv::default(),
            steps: Vec::new(),
        })
    }

    pub fn describe(&self) -> String {
        self.gpu.info.describe()
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Uploads the model's weights (done by the first `compute` otherwise).
    pub fn upload_weights(&mut self, store: &WeightStore) -> Result<(), CudaError> {
        if self.weights.as_ref().map(|w| w.source) != Some(source_of(store)) {
            self.steps.clear();
            self.weights = None;
            self.weights = Some(CudaWeights::upload(&self.gpu, store)?);
        }
        Ok(())
    }

    /// Runs `graph` for `batch`, reading back what `readout` asks into `out`.
    fn step(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        readout: &Readout,
        out: &mut [u32],
    ) -> Result<(), EngineError> {
        let sampled = matches!(readout, Readout::Sampled(_));
        check_single_step(self, graph, batch, weights, sampled)?;
        self.gpu.bind()?;
        self.upload_weights(weights)?;
        let gw = self.weights.as_ref().expect("uploaded above");
        let i = match self.steps.iter().position(|s| s.runs_graph(graph)) {
            Some(i) => i,
            None => {
                if self.steps.len() == STEP_GRAPHS {
                    self.steps.remove(0);
                }
                self.steps.push(StepGraph::new(&self.gpu, graph, gw)?);
                self.steps.len() - 1
            }
        };
        self.steps[i].run(&mut self.gpu, gw, &self.kv, batch, readout, out)?;
        Ok(())
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    /// One sequence only (like the WebGPU backend): the prepared graphs use the one cache.
    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        if layout.n_seq > 1 {
            return Err(EngineError::NotSupported(format!(
                "a KV cache of {} sequences on the CUDA backend (one context per sequence)",
                layout.n_seq
            )));
        }
        self.steps.clear();
        self.gpu.bind()?;
        self.kv = CudaKv::default();
        self.kv = CudaKv::new(&self.gpu, layout)?;
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
        let mut words = vec![0u32; out.len()];
        self.step(graph, batch, weights, &Readout::Logits, &mut words)?;
        for (o, w) in out.iter_mut().zip(words) {
            *o = f32::from_bits(w);
        }
        Ok(Poll::Ready(()))
    }

    /// Greedy sampling on the GPU: only each output row's token id is read back.
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

    /// The engine's sampling chain on the GPU (`sample.cu`): only (status, token) is read
    /// back. A step with more logit edits than the spec holds is left to the CPU.
    fn compute_sampled(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        step: &DeviceSampling,
    ) -> Result<Poll<Option<Result<u32, SamplingError>>>, EngineError> {
        let Some(spec) = step.spec_words() else {
            return Ok(Poll::Ready(None));
        };
        let mut out = [0u32; 2];
        self.step(graph, batch, weights, &Readout::Sampled(spec), &mut out)?;
        let [status, token] = out;
        Ok(Poll::Ready(Some(device_result(status, token))))
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
        self.gpu.bind()?;
        self.upload_weights(weights)?;
        let gw = self.weights.as_ref().expect("uploaded above");
        let most = self
            .kv
            .layers
            .iter()
            .map(|l| l.k_per_pos().max(l.v_per_pos()) * 2)
            .max()
            .unwrap_or(0);
        let scratch = self.gpu.alloc(most * n_moved)?;
        for layer in &self.kv.layers {
            let factors = match layer.layout.rope.freq_factors {
                Some(f) => gw.get(f).f32_vector()?,
                None => 0,
            };
            attention::shift(
                &mut self.gpu,
                layer,
                factors,
                scratch.ptr,
                n_keep,
                n_discard,
                n_moved,
            )?;
        }
        self.gpu.sync()?;
        Ok(())
    }
}
