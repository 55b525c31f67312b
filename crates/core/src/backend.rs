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

/// Consecutive rows of a batch that belong to one sequence: `len` tokens of sequence `seq`
/// (its own KV cache) at positions `pos0 ..`. Rope, the KV store and attention run per
/// segment; every other op treats rows independently, so one forward pass serves them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub seq: usize,
    pub pos0: usize,
    pub len: usize,
}

/// Per-step inputs of a micro-batch: the tokens of one or several sequences, each sequence's
/// rows one [`Segment`], in row order. A single-sequence batch is one segment.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub tokens: &'a [u32],
    /// The sequences' rows, in order, covering `tokens` (each sequence at most once).
    pub segments: &'a [Segment],
    /// Indices (into `tokens`, increasing) of the tokens whose outputs are wanted.
    pub output_rows: &'a [usize],
}

impl Batch<'_> {
    /// The batch's only segment, for a backend that computes one sequence per batch: a
    /// multi-sequence batch is refused with [`EngineError::NotSupported`] (the caller decodes
    /// its sequences one at a time instead).
    pub fn single(&self) -> Result<Segment, EngineError> {
        match self.segments {
            [one] => Ok(*one),
            _ => Err(EngineError::NotSupported(format!(
                "a batch of {} sequences on this backend",
                self.segments.len()
            ))),
        }
    }

    /// Each segment with the index of its first row.
    pub fn segment_rows(&self) -> impl Iterator<Item = (usize, Segment)> + '_ {
        self.segments.iter().scan(0, |row, s| {
            let first = *row;
            *row += s.len;
            Some((first, *s))
        })
    }
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

/// The KV cache a model needs: `n_ctx` positions for each layer, for each of `n_seq`
/// sequences (independent caches that one batch may read and write together).
#[derive(Clone, Debug, PartialEq)]
pub struct KvLayout {
    pub n_ctx: usize,
    pub n_seq: usize,
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

    /// Positions the KV cache holds per sequence (0 before [`Backend::init_kv`]).
    fn kv_n_ctx(&self) -> usize;

    /// Sequences the KV cache holds. A backend that holds one answers `NotSupported` to an
    /// [`Backend::init_kv`] of more; this default says one.
    fn kv_n_seq(&self) -> usize {
        1
    }

    /// Whether [`Backend::compute`] takes batches of several segments (sequences). A backend
    /// that does not (this default) refuses them with [`EngineError::NotSupported`].
    fn batches_sequences(&self) -> bool {
        false
    }

    /// Checks that `batch` fits `graph` and the KV cache, before a backend runs anything:
    /// its token and output-row counts are the graph's, its segments cover its tokens, name
    /// distinct sequences of the cache and fit their positions, its output rows are rows of
    /// the batch and its token ids are rows of every embedding table.
    fn check_batch(
        &self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
    ) -> Result<(), EngineError> {
        check_batch(graph, batch, weights, self.kv_n_ctx(), self.kv_n_seq())
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

    /// Drops sequence `seq`'s keys and values at positions `n..`: later steps overwrite them.
    /// This default does nothing, which is right for a cache whose slot index is the position.
    fn kv_truncate(&mut self, _seq: usize, _n: usize) {}

    /// In sequence `seq`: drops positions `n_keep .. n_keep + n_discard` of the first
    /// `n_past`, moves the rest down by `n_discard` and re-rotates their keys to their new
    /// positions. This default checks the arguments and runs [`Backend::kv_shift_checked`].
    /// `weights` are the model's (the rope's frequency factors live there).
    fn kv_shift(
        &mut self,
        weights: &WeightStore,
        seq: usize,
        n_past: usize,
        n_keep: usize,
        n_discard: usize,
    ) -> Result<(), EngineError> {
        check_shift(n_past, n_keep, n_discard, self.kv_n_ctx())?;
        if seq >= self.kv_n_seq() {
            return Err(EngineError::InvalidArgument(format!(
                "shift: sequence {seq} of {}",
                self.kv_n_seq()
            )));
        }
        self.kv_shift_checked(weights, seq, n_past, n_keep, n_discard)
    }

    /// [`Backend::kv_shift`] with arguments already checked: `seq` is a sequence of the
    /// cache, `n_keep + n_discard <= n_past` and `n_past` within the cache.
    fn kv_shift_checked(
        &mut self,
        weights: &WeightStore,
        seq: usize,
        n_past: usize,
        n_keep: usize,
        n_discard: usize,
    ) -> Result<(), EngineError>;
}

/// The checks before a step of a backend that runs one sequence per step (the GPU backends:
/// their recordings bind one cache): the batch is a single segment, fits `graph` and the
/// cache ([`Backend::check_batch`]), and a step that samples on the device (`sampled`) has an
/// output row to sample.
pub fn check_single_step<B: Backend + ?Sized>(
    backend: &B,
    graph: &Graph,
    batch: &Batch,
    weights: &WeightStore,
    sampled: bool,
) -> Result<(), EngineError> {
    batch.single()?;
    backend.check_batch(graph, batch, weights)?;
    if sampled && graph.n_outputs == 0 {
        return Err(EngineError::InvalidArgument(
            "sampling needs an output row".into(),
        ));
    }
    Ok(())
}

/// [`Backend::check_batch`] for a KV cache of `n_seq` sequences of `n_ctx` positions.
pub fn check_batch(
    graph: &Graph,
    batch: &Batch,
    weights: &WeightStore,
    n_ctx: usize,
    n_seq: usize,
) -> Result<(), EngineError> {
    let n_tokens = batch.tokens.len();
    if n_tokens != graph.n_tokens || batch.output_rows.len() != graph.n_outputs {
        return Err(EngineError::InvalidArgument(
            "batch does not match the graph's shape".into(),
        ));
    }
    check_segments(batch.segments, n_tokens, n_ctx, n_seq)?;
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

/// Segments cover `n_tokens` rows, none empty, each of a distinct sequence below `n_seq`
/// and within its `n_ctx` positions.
fn check_segments(
    segments: &[Segment],
    n_tokens: usize,
    n_ctx: usize,
    n_seq: usize,
) -> Result<(), EngineError> {
    let covered: usize = segments.iter().map(|s| s.len).sum();
    if covered != n_tokens || segments.iter().any(|s| s.len == 0) {
        return Err(EngineError::InvalidArgument(format!(
            "segments of {covered} rows for a batch of {n_tokens}"
        )));
    }
    for (i, s) in segments.iter().enumerate() {
        if s.seq >= n_seq || segments[..i].iter().any(|o| o.seq == s.seq) {
            return Err(EngineError::InvalidArgument(format!(
                "segment of sequence {} (the cache holds {n_seq}, each once per batch)",
                s.seq
            )));
        }
        if s.pos0 + s.len > n_ctx {
            return Err(EngineError::ContextFull {
                needed: s.pos0 + s.len,
                n_ctx,
            });
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
