//! The CPU backend behaving like the browser's WebGPU backend in asynchronous read-back mode:
//! each step is first only "submitted" (`Poll::Pending`), and the repeated call gives it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::{Backend, Batch, KvLayout, Segment};
use tessera_core::graph::Graph;
use tessera_core::weights::WeightStore;
use tessera_core::{EngineError, SequentialPool};

/// A step: (segments, tokens, output rows, greedy readout).
type StepKey = (Vec<Segment>, Vec<u32>, Vec<usize>, bool);

pub struct AsyncCpuBackend {
    inner: CpuBackend,
    submitted: Option<StepKey>,
    pending: Arc<AtomicUsize>,
}

impl AsyncCpuBackend {
    /// A sequential CPU backend; `pending` counts the steps answered `Poll::Pending`.
    pub fn new(pending: Arc<AtomicUsize>) -> AsyncCpuBackend {
        AsyncCpuBackend {
            inner: CpuBackend::new(Arc::new(SequentialPool)),
            submitted: None,
            pending,
        }
    }

    /// Ready when this step is the one submitted last; otherwise submits it.
    fn submit(&mut self, b: &Batch, greedy: bool) -> Poll<()> {
        let key = (
            b.segments.to_vec(),
            b.tokens.to_vec(),
            b.output_rows.to_vec(),
            greedy,
        );
        if self.submitted.take() == Some(key.clone()) {
            return Poll::Ready(());
        }
        self.submitted = Some(key);
        self.pending.fetch_add(1, Ordering::Relaxed);
        Poll::Pending
    }
}

impl Backend for AsyncCpuBackend {
    fn name(&self) -> &'static str {
        "async-cpu"
    }
    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        self.inner.init_kv(layout)
    }
    /// Stands in for a GPU backend, which picks tokens on its device.
    fn picks_on_device(&self) -> bool {
        true
    }
    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        if self.submit(batch, false).is_pending() {
            return Ok(Poll::Pending);
        }
        self.inner.compute(graph, batch, weights, out)
    }
    fn compute_greedy(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        ids: &mut [u32],
    ) -> Result<Poll<()>, EngineError> {
        if self.submit(batch, true).is_pending() {
            return Ok(Poll::Pending);
        }
        self.inner.compute_greedy(graph, batch, weights, ids)
    }
    fn kv_truncate(&mut self, seq: usize, n: usize) {
        self.inner.kv_truncate(seq, n)
    }
    fn kv_n_ctx(&self) -> usize {
        self.inner.kv_n_ctx()
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
