//! Generations stepped together: continuous batching. Each round, the generations of one
//! context (each on its own sequence) put their next step's tokens in one shared batch (one
//! decode token each, and at most one prompt slice), decoded in one forward pass, so the
//! weights are read once per round instead of once per sequence. A generation whose step
//! decodes nothing, or decodes its own way (a speculative draft, picking on the device),
//! steps alone. Every generation commits exactly the tokens it commits stepped alone.

use tessera_core::context::{Context, SeqTokens};
use tessera_core::error::EngineError;

use super::decode::Picking;
use super::params::{Clock, GenerateError};
use super::{Generation, Phase, Step};

impl Generation {
    /// The tokens this generation's next step decodes, when that step can join a batch shared
    /// with other sequences of `ctx`: the last committed token, or the next slice of the
    /// prompt (at most `room` tokens). `None`: the next step decodes nothing or decodes its
    /// own way; call [`Generation::step`]. After `Some`, the caller decodes the tokens (with
    /// [`Context::decode_together`]) and calls [`Generation::step_decoded`].
    pub fn wants(&mut self, ctx: &Context, room: usize) -> Option<SeqTokens<'_>> {
        self.planned = None;
        if room == 0 || !self.shares_batches(ctx) {
            return None;
        }
        let (tokens, logits) = match &self.phase {
            Phase::Prefill(from) => {
                let slice = self.prefill_step.min(ctx.n_batch()).min(room);
                let to = (from + slice).min(self.prompt.len());
                (&self.prompt[*from..to], to == self.prompt.len())
            }
            Phase::Decode(token) => (std::slice::from_ref(token), true),
            _ => return None,
        };
        self.planned = Some(tokens.len());
        Some(SeqTokens {
            seq: self.seq,
            tokens,
            logits,
        })
    }

    /// Whether the next step decodes tokens that a shared batch can take: a prompt slice or
    /// a decode token whose logits the sampler reads. A full context or a complete grammar
    /// (which end the generation), a speculative draft (verified in its own batch), picking on
    /// the device, and handing out a verified draft's tokens are left to [`Generation::step`].
    fn shares_batches(&self, ctx: &Context) -> bool {
        if self.picking != Picking::Cpu || !self.verified.is_empty() {
            return false;
        }
        match self.phase {
            Phase::Prefill(_) => true,
            Phase::Decode(_) => {
                self.spec.is_none()
                    && !self.grammar_complete()
                    && ctx.seq_tokens(self.seq).len() < ctx.n_ctx()
            }
            _ => false,
        }
    }

    /// Completes the step that [`Generation::wants`] planned, its tokens now decoded (their
    /// logits in the context): answers what [`Generation::step`] would have.
    pub fn step_decoded(
        &mut self,
        ctx: &mut Context,
        clock: &dyn Clock,
    ) -> Result<Step, GenerateError> {
        let result = self.complete_planned(ctx, clock);
        if result.is_err() {
            self.phase = Phase::Finished;
        }
        result
    }

    fn complete_planned(
        &mut self,
        ctx: &mut Context,
        clock: &dyn Clock,
    ) -> Result<Step, GenerateError> {
        let planned = self.planned.take().ok_or_else(|| {
            EngineError::InvalidArgument("no shared step was planned for this generation".into())
        })?;
        ctx.select(self.seq)?;
        match self.phase {
            Phase::Prefill(from) => Ok(self.prefilled(from + planned, clock)),
            Phase::Decode(_) => self.pick_next(ctx, clock),
            _ => Err(EngineError::InvalidArgument("no shared step to complete".into()).into()),
        }
    }
}

/// One round of `generations`, each on its own sequence of `ctx`: the decode tokens of all
/// that decode one token, and one prompt slice in the room left (up to the context's
/// `n_batch` tokens in all), go through one forward pass; the generations whose step
/// decodes nothing or decodes its own way step alone. On a backend that does not batch
/// sequences ([`Context::batches_sequences`]) every generation steps alone.
///
/// Answers one entry per generation, in order: its step, or `None` when it waits for a later
/// round (a prompt slice or decode token that did not fit). A failed shared decode fails every
/// generation in it (their sequences may hold part of it: clear them before reuse).
pub fn step_together(
    ctx: &mut Context,
    generations: &mut [&mut Generation],
    clock: &dyn Clock,
) -> Vec<Option<Result<Step, GenerateError>>> {
    let mut steps: Vec<Option<Result<Step, GenerateError>>> =
        (0..generations.len()).map(|_| None).collect();
    if !ctx.batches_sequences() {
        for (g, step) in generations.iter_mut().zip(&mut steps) {
            *step = Some(g.step(ctx, clock));
        }
        return steps;
    }
    let n_batch = ctx.n_batch();
    // Each joined generation's index and (a copy of) its part.
    let mut joined: Vec<(usize, SeqTokens)> = Vec::with_capacity(generations.len());
    let mut copies: Vec<Vec<u32>> = Vec::with_capacity(generations.len());
    let mut used = 0;
    let mut alone = Vec::new();
    // Decode tokens first (one each: what keeps every stream moving), then one prompt slice
    // in the room left; the generations left out wait for the next round.
    let mut prefill_joined = false;
    for decode_pass in [true, false] {
        for (i, g) in generations.iter_mut().enumerate() {
            let decoding = matches!(g.phase, Phase::Decode(_));
            if decoding != decode_pass || g.is_finished() {
                continue;
            }
            if !g.shares_batches(ctx) {
                alone.push(i);
                continue;
            }
            if used == n_batch || (!decoding && prefill_joined) {
                continue;
            }
            let part = g
                .wants(ctx, n_batch - used)
                .expect("a generation that shares batches wants tokens when there is room");
            used += part.tokens.len();
            prefill_joined |= !decoding;
            copies.push(part.tokens.to_vec());
            joined.push((
                i,
                SeqTokens {
                    tokens: &[],
                    ..part
                },
            ));
        }
    }
    for &i in &alone {
        steps[i] = Some(generations[i].step(ctx, clock));
    }
    if joined.is_empty() {
        return steps;
    }
    let parts: Vec<SeqTokens> = joined
        .iter()
        .zip(&copies)
        .map(|((_, part), tokens)| SeqTokens { tokens, ..*part })
        .collect();
    match ctx.decode_together(&parts) {
        Ok(()) => {
            for &(i, _) in &joined {
                steps[i] = Some(generations[i].step_decoded(ctx, clock));
            }
        }
        Err(e) => {
            let why = e.to_string();
            for &(i, _) in &joined {
                generations[i].phase = Phase::Finished;
                generations[i].planned = None;
                steps[i] = Some(Err(EngineError::Backend(why.clone().into()).into()));
            }
        }
    }
    steps
}
