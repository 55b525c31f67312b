//! The CPU backend counting its forward passes and the most sequences one batch held, to
//! check that a host really batches sequences together (or, claiming it cannot batch them,
//! as the WebGPU backend, that the host falls back to one sequence per batch).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::{Backend, Batch, KvLayout};
use tessera_core::graph::Graph;
use tessera_core::weights::WeightStore;
use tessera_core::EngineError;

/// What a [`CountedCpuBackend`] saw (shared with the test).
#[derive(Default, Debug)]
pub struct BatchCounts {
    pub passes: AtomicUsize,
    pub most_sequences: AtomicUsize,
}

impl BatchCounts {
    pub fn passes(&self) -> usize {
        self.passes.load(Ordering::Relaxed)
    }
    pub fn most_sequences(&self) -> usize {
        self.most_sequences.load(Ordering::Relaxed)
    }
    pub fn reset(&self) {
        self.passes.store(0, Ordering::Relaxed);
        self.most_sequences.store(0, Ordering::Relaxed);
    }
}

pub struct CountedCpuBackend {
    inner: CpuBackend,
    counts: Arc<BatchCounts>,
    batches: bool,
}

impl CountedCpuBackend {
    /// A CPU backend on `threads` rayon threads; without `batches` it refuses batches of
    /// several sequences like a backend that cannot batch them.
    pub fn new(threads: usize, counts: Arc<BatchCounts>, batches: bool) -> CountedCpuBackend {
        CountedCpuBackend {
            inner: CpuBackend::new(crate::pool(threads)),
            counts,
            batches,
        }
    }
}

impl Backend for CountedCpuBackend {
    fn name(&self) -> &'static str {
        "counted-cpu"
    }
    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        self.inner.init_kv(layout)
    }
    fn kv_n_ctx(&self) -> usize {
        self.inner.kv_n_ctx()
    }
    fn kv_n_seq(&self) -> usize {
        self.inner.kv_n_seq()
    }
    fn batches_sequences(&self) -> bool {
        self.batches
    }
    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        if !self.batches {
            batch.single()?;
        }
        self.counts.passes.fetch_add(1, Ordering::Relaxed);
        self.counts
            .most_sequences
            .fetch_max(batch.segments.len(), Ordering::Relaxed);
        self.inner.compute(graph, batch, weights, out)
    }
    fn kv_truncate(&mut self, seq: usize, n: usize) {
        self.inner.kv_truncate(seq, n)
    }
    fn kv_shift_checked(
        &mut self,
        weights: &WeightStore,
        seq: usize,
        n_past: usize,
        keep: usize,
        discard: usize,
    ) -> Result<(), EngineError> {
        self.inner
            .kv_shift_checked(weights, seq, n_past, keep, discard)
    }
}
