//! An inference context: the KV caches of one or several sequences on one backend, fed
//! tokens in micro-batches.
//!
//! The single-sequence calls ([`Context::decode`] and its kin, [`Context::truncate`], ...)
//! act on the selected sequence ([`Context::select`]; the only one in a context made with
//! [`Context::new`]). [`Context::decode_together`] decodes several sequences' tokens in one
//! forward pass: the weights are read once for all of them, each sequence attends over its own
//! KV cache at its own positions, and each gets the logits it would get alone.

mod together;

use std::sync::Arc;
use std::task::Poll;

use crate::backend::{check_shift, Backend, Batch, Segment};
use crate::error::EngineError;
use crate::graph::{Graph, GraphBuilder};
use crate::model::Model;
use crate::sampling::{DeviceSampling, SamplingError};

#[derive(Clone, Debug)]
pub struct ContextParams {
    /// Positions the KV cache holds; 0 → the model's training context.
    pub n_ctx: usize,
    /// Largest micro-batch: longer inputs are processed `n_batch` tokens at a time.
    pub n_batch: usize,
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: 4096,
            n_batch: 512,
        }
    }
}

/// Graphs kept for reuse, keyed by (n_tokens, n_outputs): decode steps all share one.
const GRAPH_CACHE: usize = 4;

/// One sequence of a context: the tokens in its KV cache and its last decoded token's logits
/// (kept per sequence: a sequence may sample them a step later, after others decoded).
struct Sequence {
    tokens: Vec<u32>,
    logits: Vec<f32>,
}

/// One sequence's part of a [`Context::decode_together`]: `tokens` appended to sequence
/// `seq`; with `logits`, its last token's logits are wanted.
#[derive(Clone, Copy, Debug)]
pub struct SeqTokens<'a> {
    pub seq: usize,
    pub tokens: &'a [u32],
    pub logits: bool,
}

pub struct Context {
    model: Arc<Model>,
    n_ctx: usize,
    n_batch: usize,
    backend: Box<dyn Backend>,
    seqs: Vec<Sequence>,
    /// The sequence the single-sequence calls act on.
    active: usize,
    all_logits: Vec<f32>,
    graphs: Vec<((usize, usize), Graph)>,
    output_rows: Vec<usize>,
}

impl Context {
    /// A context for `model` on `backend` (e.g. `tessera_backend_cpu::CpuBackend`), its KV
    /// cache allocated for `params.n_ctx` positions of one sequence.
    pub fn new(
        model: Arc<Model>,
        params: ContextParams,
        backend: Box<dyn Backend>,
    ) -> Result<Context, EngineError> {
        Context::with_sequences(model, params, 1, backend)
    }

    /// A context of `n_seq` sequences, each with a KV cache of `params.n_ctx` positions, on
    /// one backend. A backend that holds one sequence only answers
    /// [`EngineError::NotSupported`] for more (the caller makes one context per sequence).
    pub fn with_sequences(
        model: Arc<Model>,
        params: ContextParams,
        n_seq: usize,
        mut backend: Box<dyn Backend>,
    ) -> Result<Context, EngineError> {
        if n_seq == 0 {
            return Err(EngineError::InvalidArgument(
                "a context needs at least one sequence".into(),
            ));
        }
        let n_ctx = if params.n_ctx == 0 {
            model.n_ctx_train()
        } else {
            params.n_ctx
        };
        if params.n_batch == 0 {
            return Err(EngineError::InvalidArgument(
                "n_batch must be at least 1".into(),
            ));
        }
        if n_ctx > 1 << 22 {
            return Err(EngineError::InvalidArgument(format!(
                "n_ctx {n_ctx} is too large"
            )));
        }
        let mut layout = model.architecture().kv_layout(n_ctx);
        layout.n_seq = n_seq;
        backend.init_kv(&layout)?;
        let n_vocab = model.n_vocab();
        let seqs = (0..n_seq)
            .map(|_| Sequence {
                tokens: Vec::with_capacity(n_ctx),
                logits: vec![0.0; n_vocab],
            })
            .collect();
        Ok(Context {
            model,
            n_ctx,
            n_batch: params.n_batch,
            backend,
            seqs,
            active: 0,
            all_logits: Vec::new(),
            graphs: Vec::new(),
            output_rows: Vec::new(),
        })
    }

    /// Sequences in the context.
    pub fn n_seq(&self) -> usize {
        self.seqs.len()
    }

    /// The sequence the single-sequence calls act on.
    pub fn selected(&self) -> usize {
        self.active
    }

    /// Makes the single-sequence calls act on sequence `seq`.
    pub fn select(&mut self, seq: usize) -> Result<(), EngineError> {
        if seq >= self.seqs.len() {
            return Err(EngineError::InvalidArgument(format!(
                "sequence {seq} of a context of {}",
                self.seqs.len()
            )));
        }
        self.active = seq;
        Ok(())
    }

    /// Whether [`Context::decode_together`] runs several sequences in one batch on this
    /// backend ([`Backend::batches_sequences`]).
    pub fn batches_sequences(&self) -> bool {
        self.seqs.len() > 1 && self.backend.batches_sequences()
    }

    /// The graph for a micro-batch of `n_tokens` tokens and `n_outputs` outputs, built once
    /// and kept among the last few.
    fn graph_index(&mut self, n_tokens: usize, n_outputs: usize) -> Result<usize, EngineError> {
        let key = (n_tokens, n_outputs);
        if let Some(i) = self.graphs.iter().position(|(k, _)| *k == key) {
            return Ok(i);
        }
        let model = &self.model;
        let mut b = GraphBuilder::new(model.weights(), n_tokens, n_outputs);
        b.n_ctx = self.n_ctx;
        let out = model.architecture().build(&mut b)?;
        if self.graphs.len() == GRAPH_CACHE {
            self.graphs.remove(0);
        }
        self.graphs.push((key, b.finish(out)));
        Ok(self.graphs.len() - 1)
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Whether the backend picks tokens on its device ([`Backend::picks_on_device`]).
    pub fn picks_on_device(&self) -> bool {
        self.backend.picks_on_device()
    }

    /// Appends `tokens` at the current position, `n_batch` at a time. Afterwards
    /// [`Context::logits`] holds the last token's logits and, when `all_logits`,
    /// [`Context::all_logits`] every token's.
    ///
    /// For a synchronous backend; an asynchronous one answers
    /// [`EngineError::AsynchronousBackend`] here and is driven with [`Context::poll_decode`].
    pub fn decode(&mut self, tokens: &[u32], all_logits: bool) -> Result<(), EngineError> {
        ready(self.poll_decode(tokens, all_logits)?)
    }

    /// [`Context::decode`] on any backend. With one whose read-back is asynchronous
    /// (`WgpuBackend` in a browser) a call may answer `Poll::Pending` after submitting a
    /// micro-batch: the tokens of that micro-batch are not committed, so repeating the call
    /// once the read-back is done returns its result. Callers of such a backend pass at most
    /// `n_batch` tokens per call (earlier micro-batches of a longer call would already be
    /// committed).
    pub fn poll_decode(
        &mut self,
        tokens: &[u32],
        all_logits: bool,
    ) -> Result<Poll<()>, EngineError> {
        let n_kept = if all_logits { tokens.len() } else { 1 };
        self.decode_with(tokens, n_kept, all_logits, None, None)
    }

    /// Appends `tokens` like [`Context::decode`] and keeps the logits of the last `n_kept` of
    /// them (1 ..= `tokens.len()`) in [`Context::all_logits`], in order; the output projection
    /// runs for those rows only (llama-perplexity asks for the scored half of each chunk so).
    pub fn decode_keeping_last(
        &mut self,
        tokens: &[u32],
        n_kept: usize,
    ) -> Result<(), EngineError> {
        if n_kept == 0 || n_kept > tokens.len() {
            return Err(EngineError::InvalidArgument(format!(
                "keep the logits of {n_kept} of {} tokens",
                tokens.len()
            )));
        }
        ready(self.decode_with(tokens, n_kept, true, None, None)?)
    }

    /// Appends `tokens` like [`Context::decode`] but keeps no logits: returns the greedy next
    /// token after every token (`all`) or after the last one only. On a GPU backend only these
    /// ids leave the device. [`Context::logits`] is not updated.
    pub fn decode_greedy(&mut self, tokens: &[u32], all: bool) -> Result<Vec<u32>, EngineError> {
        ready(self.poll_decode_greedy(tokens, all)?)
    }

    /// [`Context::decode_greedy`] on any backend (pending as [`Context::poll_decode`] is).
    pub fn poll_decode_greedy(
        &mut self,
        tokens: &[u32],
        all: bool,
    ) -> Result<Poll<Vec<u32>>, EngineError> {
        let n_kept = if all { tokens.len() } else { 1 };
        let mut ids = Vec::with_capacity(n_kept);
        Ok(self
            .decode_with(tokens, n_kept, false, Some(&mut ids), None)?
            .map(|()| ids))
    }

    /// Appends `tokens` like [`Context::decode`] and samples the next token from the last
    /// one's logits with `step` (from [`Sampler::device_step`](crate::sampling::Sampler::device_step)).
    /// A backend that samples on its device reads back only the token id, and then
    /// [`Context::logits`] is not updated; otherwise the logits are computed and sampled on the
    /// CPU ([`DeviceSampling::sample_cpu`]).
    ///
    /// The outer error is the decode's, the inner one the sampling's (every logit masked, a NaN).
    pub fn decode_sampled(
        &mut self,
        tokens: &[u32],
        step: &DeviceSampling,
    ) -> Result<Result<u32, SamplingError>, EngineError> {
        ready(self.poll_decode_sampled(tokens, step)?)
    }

    /// [`Context::decode_sampled`] on any backend (pending as [`Context::poll_decode`] is). A
    /// repeated call after `Poll::Pending` must pass the same `step` (its draw is taken once).
    pub fn poll_decode_sampled(
        &mut self,
        tokens: &[u32],
        step: &DeviceSampling,
    ) -> Result<Poll<Result<u32, SamplingError>>, EngineError> {
        let mut sampled = None;
        if self
            .decode_with(tokens, 1, false, None, Some((step, &mut sampled)))?
            .is_pending()
        {
            return Ok(Poll::Pending);
        }
        Ok(Poll::Ready(match sampled {
            Some(result) => result,
            None => step.sample_cpu(&self.seqs[self.active].logits[..self.model.n_vocab()]),
        }))
    }

    /// Decodes `tokens` in micro-batches; the outputs (logits, greedy ids or a sample) are those
    /// of the last `n_kept` tokens (1 ..= `tokens.len()`, checked by the callers). Their logits
    /// go to `all_logits` when `keep_rows` (and no greedy or sampled output is asked for).
    fn decode_with(
        &mut self,
        tokens: &[u32],
        n_kept: usize,
        keep_rows: bool,
        mut greedy: Option<&mut Vec<u32>>,
        mut sample: Option<(&DeviceSampling, &mut Option<Result<u32, SamplingError>>)>,
    ) -> Result<Poll<()>, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::InvalidArgument("decode of no tokens".into()));
        }
        let needed = self.seqs[self.active].tokens.len() + tokens.len();
        if needed > self.n_ctx {
            return Err(EngineError::ContextFull {
                needed,
                n_ctx: self.n_ctx,
            });
        }
        let n_vocab = self.model.n_vocab();
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(EngineError::BadToken { id, n_vocab });
        }
        let keep_rows = keep_rows && greedy.is_none() && sample.is_none();
        if keep_rows {
            self.all_logits.resize(n_kept * n_vocab, 0.0);
        } else {
            self.all_logits.clear();
        }
        let first_kept = tokens.len() - n_kept;
        let n_chunks = tokens.len().div_ceil(self.n_batch);
        let mut kept_so_far = 0;
        for (c, chunk) in tokens.chunks(self.n_batch).enumerate() {
            let last = c + 1 == n_chunks;
            let chunk_start = c * self.n_batch;
            self.output_rows.clear();
            self.output_rows
                .extend(first_kept.saturating_sub(chunk_start).min(chunk.len())..chunk.len());
            let key = (chunk.len(), self.output_rows.len());
            let gi = self.graph_index(key.0, key.1)?;
            let seq = &mut self.seqs[self.active];
            let segments = [Segment {
                seq: self.active,
                pos0: seq.tokens.len(),
                len: chunk.len(),
            }];
            let batch = Batch {
                tokens: chunk,
                segments: &segments,
                output_rows: &self.output_rows,
            };
            let graph = &self.graphs[gi].1;
            let on_device = match sample.as_mut() {
                Some((step, sampled)) if last => {
                    match self
                        .backend
                        .compute_sampled(graph, &batch, self.model.weights(), step)?
                    {
                        Poll::Ready(result) => **sampled = result,
                        Poll::Pending => return Ok(Poll::Pending),
                    }
                    sampled.is_some()
                }
                _ => false,
            };
            let progress = if on_device {
                Poll::Ready(())
            } else if let Some(ids) = greedy.as_deref_mut() {
                let at = ids.len();
                ids.resize(at + key.1, 0);
                let progress = self.backend.compute_greedy(
                    graph,
                    &batch,
                    self.model.weights(),
                    &mut ids[at..],
                )?;
                if progress.is_pending() {
                    ids.truncate(at);
                }
                progress
            } else {
                let out: &mut [f32] = if keep_rows {
                    &mut self.all_logits[kept_so_far * n_vocab..(kept_so_far + key.1) * n_vocab]
                } else {
                    &mut seq.logits[..key.1 * n_vocab]
                };
                self.backend
                    .compute(graph, &batch, self.model.weights(), out)?
            };
            if progress.is_pending() {
                // This micro-batch is not committed: the repeated call submits it again.
                return Ok(Poll::Pending);
            }
            kept_so_far += key.1;
            seq.tokens.extend_from_slice(chunk);
        }
        if keep_rows {
            let n = self.all_logits.len();
            self.seqs[self.active]
                .logits
                .copy_from_slice(&self.all_logits[n - n_vocab..]);
        }
        Ok(Poll::Ready(()))
    }

    /// The selected sequence's last decoded token's logits (`n_vocab`).
    pub fn logits(&self) -> &[f32] {
        &self.seqs[self.active].logits
    }

    /// Sequence `seq`'s last decoded token's logits (`n_vocab`).
    pub fn seq_logits(&self, seq: usize) -> &[f32] {
        &self.seqs[seq].logits
    }

    /// The tokens in sequence `seq`'s KV cache.
    pub fn seq_tokens(&self, seq: usize) -> &[u32] {
        &self.seqs[seq].tokens
    }

    /// Every token's logits from the last `decode(.., true)` (`tokens.len() * n_vocab`), or the
    /// kept tokens' from the last [`Context::decode_keeping_last`].
    pub fn all_logits(&self) -> &[f32] {
        &self.all_logits
    }

    /// Positions in the selected sequence's KV cache.
    pub fn n_past(&self) -> usize {
        self.seqs[self.active].tokens.len()
    }

    /// The tokens in the selected sequence's KV cache.
    pub fn tokens(&self) -> &[u32] {
        &self.seqs[self.active].tokens
    }

    /// Keeps the first `n` positions of the selected sequence (no-op when `n >= n_past`).
    pub fn truncate(&mut self, n: usize) {
        let tokens = &mut self.seqs[self.active].tokens;
        if n < tokens.len() {
            tokens.truncate(n);
            self.backend.kv_truncate(self.active, n);
        }
    }

    /// Empties the selected sequence.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Frees room like llama.cpp's context shift: keeps the first `n_keep` positions, drops the
    /// next `n_discard`, and moves the rest down (their keys re-rotated to the new positions).
    /// Acts on the selected sequence.
    pub fn shift(&mut self, n_keep: usize, n_discard: usize) -> Result<(), EngineError> {
        let n_past = self.n_past();
        // Checked here too, not only by the backend's default: the drain below needs it.
        check_shift(n_past, n_keep, n_discard, self.n_ctx)?;
        self.backend
            .kv_shift(self.model.weights(), self.active, n_past, n_keep, n_discard)?;
        self.seqs[self.active]
            .tokens
            .drain(n_keep..n_keep + n_discard);
        Ok(())
    }
}

/// A synchronous entry point's answer: a pending step means the backend is asynchronous.
fn ready<T>(progress: Poll<T>) -> Result<T, EngineError> {
    match progress {
        Poll::Ready(v) => Ok(v),
        Poll::Pending => Err(EngineError::AsynchronousBackend),
    }
}
