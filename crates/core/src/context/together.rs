//! Several sequences' tokens in one forward pass: continuous batching's engine side.

use super::{Context, SeqTokens};
use crate::backend::{Batch, Segment};
use crate::error::EngineError;

impl Context {
    /// Appends each part's tokens to its sequence, all parts in one batch (in micro-batches
    /// of `n_batch` tokens when they are more; a part may straddle two). Afterwards each part
    /// that asked for `logits` has its last token's logits in [`Context::seq_logits`].
    ///
    /// The weights are read once per micro-batch for every sequence in it; each sequence
    /// attends over its own KV cache at its own positions, so on a backend whose kernels treat
    /// rows independently (the CPU's) every sequence gets, bit for bit, the logits and KV
    /// cache it would get decoded alone.
    ///
    /// Several parts need a backend that batches sequences ([`Context::batches_sequences`]):
    /// otherwise the answer is [`EngineError::NotSupported`] and nothing was decoded, and the
    /// caller decodes the sequences one at a time. A failed micro-batch commits nothing (earlier
    /// micro-batches of the call stay committed). For synchronous backends.
    pub fn decode_together(&mut self, parts: &[SeqTokens]) -> Result<(), EngineError> {
        self.check_parts(parts)?;
        if parts.len() > 1 && !self.batches_sequences() {
            return Err(EngineError::NotSupported(format!(
                "the {} backend decodes one sequence per batch",
                self.backend.name()
            )));
        }
        let n_vocab = self.model.n_vocab();
        let mut tokens = Vec::with_capacity(self.n_batch);
        let mut segments = Vec::with_capacity(parts.len());
        // Which sequence each output row's logits belong to.
        let mut wanted = Vec::with_capacity(parts.len());
        let mut out = Vec::new();
        let (mut part, mut done_in_part) = (0, 0);
        while part < parts.len() {
            tokens.clear();
            segments.clear();
            wanted.clear();
            self.output_rows.clear();
            while part < parts.len() && tokens.len() < self.n_batch {
                let p = parts[part];
                let take = (p.tokens.len() - done_in_part).min(self.n_batch - tokens.len());
                segments.push(Segment {
                    seq: p.seq,
                    pos0: self.seqs[p.seq].tokens.len(),
                    len: take,
                });
                tokens.extend_from_slice(&p.tokens[done_in_part..done_in_part + take]);
                done_in_part += take;
                if done_in_part == p.tokens.len() {
                    if p.logits {
                        self.output_rows.push(tokens.len() - 1);
                        wanted.push(p.seq);
                    }
                    part += 1;
                    done_in_part = 0;
                }
            }
            let gi = self.graph_index(tokens.len(), wanted.len())?;
            out.resize(wanted.len() * n_vocab, 0.0);
            let batch = Batch {
                tokens: &tokens,
                segments: &segments,
                output_rows: &self.output_rows,
            };
            let progress =
                self.backend
                    .compute(&self.graphs[gi].1, &batch, self.model.weights(), &mut out)?;
            if progress.is_pending() {
                return Err(EngineError::AsynchronousBackend);
            }
            let mut row = 0;
            for s in &segments {
                self.seqs[s.seq]
                    .tokens
                    .extend_from_slice(&tokens[row..row + s.len]);
                row += s.len;
            }
            for (&seq, logits) in wanted.iter().zip(out.chunks_exact(n_vocab)) {
                self.seqs[seq].logits.copy_from_slice(logits);
            }
        }
        Ok(())
    }

    /// Parts name distinct sequences of the context, each with tokens that fit its cache and
    /// are in the vocabulary.
    fn check_parts(&self, parts: &[SeqTokens]) -> Result<(), EngineError> {
        if parts.is_empty() {
            return Err(EngineError::InvalidArgument(
                "decode of no sequences".into(),
            ));
        }
        let n_vocab = self.model.n_vocab();
        for (i, p) in parts.iter().enumerate() {
            if p.seq >= self.seqs.len() || parts[..i].iter().any(|o| o.seq == p.seq) {
                return Err(EngineError::InvalidArgument(format!(
                    "part of sequence {} (the context has {}, each once per call)",
                    p.seq,
                    self.seqs.len()
                )));
            }
            if p.tokens.is_empty() {
                return Err(EngineError::InvalidArgument(format!(
                    "no tokens for sequence {}",
                    p.seq
                )));
            }
            let needed = self.seqs[p.seq].tokens.len() + p.tokens.len();
            if needed > self.n_ctx {
                return Err(EngineError::ContextFull {
                    needed,
                    n_ctx: self.n_ctx,
                });
            }
            if let Some(&id) = p.tokens.iter().find(|&&t| t as usize >= n_vocab) {
                return Err(EngineError::BadToken { id, n_vocab });
            }
        }
        Ok(())
    }
}
