//! The `Backend` trait: what a device (CPU, WebGPU, Vulkan, CUDA) implements to run graphs.
//!
//! A backend owns its KV cache and its scratch buffers; the engine hands it a graph, the
//! batch's per-step inputs and the weights, and gets back the output rows.
//!
//! A backend whose results come back asynchronously (WebGPU in a browser, where a buffer map
//! completes only on the JS event loop) answers a step with `Poll::Pending`: the step was
//! submitted and nothing was written to the output. The caller awaits the backend's read-back
//! and repeats the same call, which then answers `Poll::Ready`. Synchronous backends always
//! answer `Poll::Ready`.

use std::task::Poll;

use crate::error::EngineError;
use crate::graph::{Graph, Op, RopeParams};
use crate::sampling::{DeviceSampling, SamplingError};
use crate::weights::WeightStore;

/// Per-step inputs of a micro-batch of one sequence: token `i` is at position `pos0 + i`.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub tokens: &'a [u32],
    pub pos0: usize,
    /// Indices (into `tokens`, increasing) of the tokens whose outputs are wanted.
    pub output_rows: &'a [usize],
}

/// Shape of one layer's KV cache entry (per position).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KvLayerLayout {
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    /// How this layer's keys were rotated (to re-rotate them on a context shift).
    pub rope: RopeParams,
}

/// The KV cache a model needs: `n_ctx` positions for each layer.
#[derive(Clone, Debug, PartialEq)]
pub struct KvLayout {
    pub n_ctx: usize,
    pub layers: Vec<KvLayerLayout>,
}

/// The largest head dimension (keys or values) the backends' attention kernels support; a model
/// with larger heads is refused at load time.
pub const MAX_HEAD_DIM: usize = 512;

/// Index of the largest value (the first among equals; NaNs never win).
pub fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] || row[best].is_nan() && !v.is_nan() {
            best = i;
        }
    }
    best
}

pub trait Backend: Send {
    fn name(&self) -> &'static str;

    /// Allocates (or re-allocates) the KV cache, empty.
    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError>;

    /// Positions the KV cache holds (0 before [`Backend::init_kv`]).
    fn kv_n_ctx(&self) -> usize;

    /// Checks that `batch` fits `graph` and the KV cache, before a backend runs anything:
    /// its token and output-row counts are the graph's, its positions fit the cache, its
    /// output rows are rows of the batch and its token ids are rows of every embedding table.
    fn check_batch(
        &self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
    ) -> Result<(), EngineError> {
        check_batch(graph, batch, weights, self.kv_n_ctx())
    }

    /// Runs `graph` for `batch`, storing the batch's keys and values in the KV cache, and
    /// writes the graph's output (`graph.n_outputs` rows) into `out`.
    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError>;

    /// Like [`Backend::compute`] for a graph whose output rows are logits, but gives only each
    /// output row's greedy token (the index of its largest logit, the lowest among equals).
    /// GPU backends override it to sample on the device and read back only the ids; this
    /// default computes the logits and picks on the CPU.
    fn compute_greedy(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        ids: &mut [u32],
    ) -> Result<Poll<()>, EngineError> {
        let width = graph.node(graph.output).ne[0];
        let mut logits = vec![0.0f32; width * graph.n_outputs];
        if self
            .compute(graph, batch, weights, &mut logits)?
            .is_pending()
        {
            return Ok(Poll::Pending);
        }
        for (id, row) in ids.iter_mut().zip(logits.chunks_exact(width.max(1))) {
            *id = argmax(row) as u32;
        }
        Ok(Poll::Ready(()))
    }

    /// Whether [`Backend::compute_greedy`] and [`Backend::compute_sampled`] pick tokens on the
    /// device, so that only token ids are read back. When not (this default), callers that
    /// need the logits anyway (the sampler checks them for NaNs) should read the logits back.
    fn picks_on_device(&self) -> bool {
        false
    }

    /// Like [`Backend::compute`] for a graph whose output rows are logits, but samples the
    /// last output row with `step` on the device and gives only the token (or the sampling
    /// error: every logit masked, a NaN logit). `Ready(None)` (this default) means the backend
    /// does not sample on its device and computed nothing: the caller computes the logits and
    /// samples them with [`DeviceSampling::sample_cpu`].
    fn compute_sampled(
        &mut self,
        _graph: &Graph,
        _batch: &Batch,
        _weights: &WeightStore,
        _step: &DeviceSampling,
    ) -> Result<Poll<Option<Result<u32, SamplingError>>>, EngineError> {
        Ok(Poll::Ready(None))
    }

    /// Drops the keys and values at positions `n..`: later steps overwrite them. This default
    /// does nothing, which is right for a cache whose slot index is the position.
    fn kv_truncate(&mut self, _n: usize) {}

    /// Drops positions `n_keep .. n_keep + n_discard` of the first `n_past`, moves the rest
    /// down by `n_discard` and re-rotates their keys to their new positions. This default
    /// checks the arguments and runs [`Backend::kv_shift_checked`].
    /// `weights` are the model's (the rope's frequency factors live there).
    fn kv_shift(
        &mut self,
        weights: &WeightStore,
        n_past: usize,
        n_keep: usize,
        n_discard: usize,
    ) -> Result<(), EngineError> {
        check_shift(n_past, n_keep, n_discard, self.kv_n_ctx())?;
        self.kv_shift_checked(weights, n_past, n_keep, n_discard)
    }

    /// [`Backend::kv_shift`] with arguments already checked: `n_keep + n_discard <= n_past`
    /// and `n_past` within the cache.
    fn kv_shift_checked(
        &mut self,
        weights: &WeightStore,
        n_past: usize,
        n_keep: usize,
        n_discard: usize,
    ) -> Result<(), EngineError>;
}

/// [`Backend::check_batch`] for a KV cache of `n_ctx` positions.
pub fn check_batch(
    graph: &Graph,
    batch: &Batch,
    weights: &WeightStore,
    n_ctx: usize,
) -> Result<(), EngineError> {
    let n_tokens = batch.tokens.len();
    if n_tokens != graph.n_tokens || batch.output_rows.len() != graph.n_outputs {
        return Err(EngineError::InvalidArgument(
            "batch does not match the graph's shape".into(),
        ));
    }
    if batch.pos0 + n_tokens > n_ctx {
        return Err(EngineError::ContextFull {
            needed: batch.pos0 + n_tokens,
            n_ctx,
        });
    }
    if let Some(&r) = batch.output_rows.iter().find(|&&r| r >= n_tokens) {
        return Err(EngineError::InvalidArgument(format!(
            "output row {r} of a batch of {n_tokens}"
        )));
    }
    for node in &graph.nodes {
        if let Op::GetRows { table } = node.op {
            let n_rows = weights.desc(table).n_rows();
            if let Some(&id) = batch.tokens.iter().find(|&&t| t as usize >= n_rows) {
                return Err(EngineError::BadToken {
                    id,
                    n_vocab: n_rows,
                });
            }
        }
    }
    Ok(())
}

/// Checks [`Backend::kv_shift`]'s arguments: the kept and discarded positions must lie within
/// the first `n_past`, and those within the cache's `n_ctx` positions.
pub fn check_shift(
    n_past: usize,
    n_keep: usize,
    n_discard: usize,
    n_ctx: usize,
) -> Result<(), EngineError> {
    if n_keep + n_discard > n_past {
        return Err(EngineError::InvalidArgument(format!(
            "shift: keep {n_keep} + discard {n_discard} > {n_past} positions"
        )));
    }
    if n_past > n_ctx {
        return Err(EngineError::InvalidArgument(format!(
            "shift: {n_past} positions > context {n_ctx}"
        )));
    }
    Ok(())
}
