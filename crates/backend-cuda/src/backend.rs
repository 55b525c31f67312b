//! `CudaBackend`: the engine's [`Backend`] on a CUDA device.

use std::task::Poll;

use tessera_core::backend::{Backend, Batch, KvLayout};
use tessera_core::graph::Graph;
use tessera_core::weights::WeightStore;
use tessera_core::EngineError;

use crate::error::CudaError;
use crate::libs;
use crate::probe::{self, DeviceInfo};

pub struct CudaBackend {
    device: DeviceInfo,
}

impl CudaBackend {
    /// Opens device `ordinal`: [`CudaError::NoDriver`] without a driver, [`CudaError::NoNvrtc`]
    /// when its kernels cannot be compiled.
    pub fn new(ordinal: usize) -> Result<CudaBackend, CudaError> {
        let device = probe::device(ordinal)?;
        libs::require_nvrtc()?;
        Err(CudaError::Unsupported(format!(
            "running graphs on {} (not implemented yet)",
            device.name
        )))
    }

    pub fn describe(&self) -> String {
        self.device.describe()
    }

    pub fn upload_weights(&mut self, _store: &WeightStore) -> Result<(), CudaError> {
        Err(CudaError::Unsupported("weights".into()))
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn init_kv(&mut self, _layout: &KvLayout) -> Result<(), EngineError> {
        Err(CudaError::Unsupported("KV cache".into()).into())
    }

    fn kv_n_ctx(&self) -> usize {
        0
    }

    fn compute(
        &mut self,
        _graph: &Graph,
        _batch: &Batch,
        _weights: &WeightStore,
        _out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        Err(CudaError::Unsupported("graphs".into()).into())
    }

    fn kv_shift_checked(
        &mut self,
        _weights: &WeightStore,
        _seq: usize,
        _n_past: usize,
        _n_keep: usize,
        _n_discard: usize,
    ) -> Result<(), EngineError> {
        Err(CudaError::Unsupported("KV shift".into()).into())
    }
}
