//! The generation state machine: one [`Generation`] per sequence, advanced one [`Step`] at a
//! time against the [`Context`] that holds the sequence's KV cache.
//!
//! Each [`Generation::step`] decodes one slice of the prompt, or picks the next token and
//! hands out the text it completes, or (with a speculator) verifies a draft in one batch and
//! commits several tokens. Between steps the host may do anything else: post text to a page,
//! hear an abort ([`Generation::cancel`]), or step other sequences. All state lives in the
//! `Generation` value; the context is lent to each step.
//!
//! On a backend whose results come back asynchronously (WebGPU in a browser) a step may answer
//! [`Step::Pending`]: its work was submitted and nothing else changed; the host awaits the
//! backend's read-back and calls `step` again, which completes it.
//!
//! [`crate::generate::generate`] is this machine run to its end in one call.

mod decode;
mod output;
mod params;
mod shared;
mod speculation;

use std::collections::VecDeque;
use std::sync::Arc;

use tessera_core::context::Context;
use tessera_core::error::EngineError;
use tessera_core::model::Model;
use tessera_core::sampling::{DeviceSampling, Sampler};

use crate::constraint::{GrammarEnv, Guide};
use crate::speculative::SpeculatorChain;
use crate::stop::StopMatcher;
use decode::Picking;
use speculation::Speculation;

pub use params::{
    prompt_sampler, Clock, GenerateError, GenerateParams, GenerateStats, NoClock, StopReason,
};
pub use shared::step_together;
pub use speculation::SpecReport;

/// Prompt tokens an interactive host decodes per step: small enough that an abort is heard
/// within a fraction of a second, large enough to keep the batched matmuls efficient. Any
/// split gives the same logits.
pub const PREFILL_STEP: usize = 128;

/// How a [`Generation`] runs (what it produces is set by [`GenerateParams`]).
pub struct GenerationOptions {
    /// Pick tokens where the logits are computed when the backend can
    /// ([`Backend::picks_on_device`](tessera_core::Backend::picks_on_device): only a token id is
    /// read back): `Context::decode_greedy` for plain greedy sampling, else
    /// `Context::decode_sampled`. Off: the logits are read back and the sampler picks.
    pub device_sampling: bool,
    /// Most prompt tokens decoded per step (at most the context's `n_batch` in any case).
    pub prefill_step: usize,
    /// Speculative decoding with this chain (the output stays that of plain decoding). Its
    /// verification reads logits back, so tokens are then picked on the CPU.
    pub speculator: Option<SpeculatorChain>,
    /// Context shift (llama.cpp's): when the context is full, keep the first `n_keep`
    /// positions, drop half of the rest and go on, instead of ending with
    /// [`StopReason::ContextFull`]. Not with a speculator.
    pub context_shift: Option<usize>,
}

impl Default for GenerationOptions {
    /// Picking on the device, the prompt in `n_batch` slices, no speculation.
    fn default() -> Self {
        GenerationOptions {
            device_sampling: true,
            prefill_step: usize::MAX,
            speculator: None,
            context_shift: None,
        }
    }
}

/// What one [`Generation::step`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The step was submitted to an asynchronous backend and nothing else changed: await the
    /// backend's read-back, then call `step` again.
    Pending,
    /// A slice of the prompt was decoded: `n_decoded` of the prompt's `n_prompt` tokens are
    /// in the context now.
    Prefilled { n_decoded: usize, n_prompt: usize },
    /// A token was committed; `text` is what became safe to show (possibly empty: part of a
    /// character or of a possible stop string). A verified draft commits several tokens, which
    /// later steps hand out one by one (without computing anything), so that a host that stops
    /// after a token keeps exactly the tokens plain decoding would have given it.
    Tokens { ids: Vec<u32>, text: String },
    /// The generation ended: `text` is the last text to show (possibly empty).
    Done {
        text: String,
        stats: GenerateStats,
        /// Set when the generation was speculative.
        speculative: Option<SpecReport>,
    },
}

enum Phase {
    /// Decoding the prompt from this index on.
    Prefill(usize),
    /// The prompt is decoded; the next step picks the first token.
    FirstToken,
    /// This committed token must be decoded before the next one is picked.
    Decode(u32),
    /// The generation has ended; steps are refused.
    Finished,
}

/// One sequence's generation after a prompt (see the module's documentation).
pub struct Generation {
    model: Arc<Model>,
    prompt: Vec<u32>,
    params: GenerateParams,
    sampler: Sampler,
    stops: StopMatcher,
    /// Bytes of a UTF-8 character split across tokens, held until it is complete.
    partial_char: Vec<u8>,
    tokens: Vec<u32>,
    phase: Phase,
    /// Prompt tokens reused from the KV cache.
    kept: usize,
    prefill_step: usize,
    picking: Picking,
    /// The token the device picked after the last decoded step.
    next: Option<u32>,
    /// Tokens of a verified draft not handed out yet, in order (the KV cache holds all but
    /// the last).
    verified: VecDeque<u32>,
    /// The sampling step of a pending `DeviceSampled` step: its draw is taken once, and the
    /// repeated call (after the read-back) must be the same step.
    draw: Option<DeviceSampling>,
    t_start: f64,
    t_prompt_done: f64,
    spec: Option<Speculation>,
    /// Positions a context shift keeps (see [`GenerationOptions::context_shift`]).
    shift_keep: Option<usize>,
    /// The context's sequence this generation runs on (the one selected at its start).
    seq: usize,
    /// Tokens of the step [`Generation::wants`] handed to a shared batch.
    planned: Option<usize>,
    /// The grammar's state, when [`GenerateParams::grammar`] asks for one.
    guide: Option<Guide>,
}

impl Generation {
    /// Starts generating after `prompt` in `ctx`, on its selected sequence
    /// ([`Context::select`]). The longest prefix the KV cache shares with `prompt` is kept
    /// (chat turns re-send the whole history) and only the rest is decoded, at least one token
    /// for fresh logits. The context must be the one passed to every [`Generation::step`]
    /// (which selects the generation's sequence again).
    pub fn start(
        ctx: &mut Context,
        prompt: Vec<u32>,
        params: GenerateParams,
        options: GenerationOptions,
        clock: &dyn Clock,
    ) -> Result<Generation, GenerateError> {
        check_sequence(ctx, &prompt)?;
        let model = ctx.model().clone();
        let sampler = prompt_sampler(&params, model.tokenizer(), &prompt)?;
        let guide = match &params.grammar {
            Some(grammar) => Some(Guide::new(GrammarEnv::for_model(&model)?, grammar)?),
            None => None,
        };
        // A grammar picks each token against its mask on the CPU, one at a time: no drafts
        // (they would need the grammar's verdict on every drafted token first).
        let spec = match options.speculator.filter(|_| guide.is_none()) {
            Some(chain) => Some(Speculation::begin(chain, &prompt)?),
            None => None,
        };
        let common = ctx
            .tokens()
            .iter()
            .zip(&prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let kept = common.min(prompt.len() - 1);
        ctx.truncate(kept);
        // On a backend that computes where it reads back (the CPU) the sampler picks from the
        // logits: nothing is saved by picking "on the device", and the sampler reports NaNs.
        // A grammar's mask is applied by the CPU sampler (the device chains take none yet).
        let on_device =
            options.device_sampling && ctx.picks_on_device() && spec.is_none() && guide.is_none();
        let picking = Picking::choose(&params, on_device);
        let now = clock.now_s();
        Ok(Generation {
            model,
            stops: StopMatcher::new(&params.stop),
            prompt,
            params,
            sampler,
            partial_char: Vec::new(),
            tokens: Vec::new(),
            phase: Phase::Prefill(kept),
            kept,
            prefill_step: options.prefill_step.max(1),
            picking,
            next: None,
            verified: VecDeque::new(),
            draw: None,
            t_start: now,
            t_prompt_done: now,
            shift_keep: options.context_shift.filter(|_| spec.is_none()),
            spec,
            seq: ctx.selected(),
            planned: None,
            guide,
        })
    }

    /// Advances by one slice of the prompt, one token, or one verified draft. After
    /// [`Step::Done`] or an error the generation is over and further steps are refused.
    pub fn step(&mut self, ctx: &mut Context, clock: &dyn Clock) -> Result<Step, GenerateError> {
        self.planned = None;
        let result = ctx
            .select(self.seq)
            .map_err(GenerateError::from)
            .and_then(|()| self.advance(ctx, clock));
        if result.is_err() {
            self.phase = Phase::Finished;
        }
        result
    }

    /// Ends the generation (unless it has ended) and returns its statistics; tokens of a
    /// verified draft not handed out yet are dropped.
    pub fn cancel(&mut self, clock: &dyn Clock) -> Option<GenerateStats> {
        if matches!(self.phase, Phase::Finished) {
            return None;
        }
        if matches!(self.phase, Phase::Prefill(_)) {
            self.t_prompt_done = clock.now_s();
        }
        let reason = StopReason::Cancelled;
        Some(self.finish(reason, String::new(), clock).1)
    }

    /// True once the generation has ended (done, cancelled or failed).
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished)
    }

    /// The context's sequence this generation runs on.
    pub fn sequence(&self) -> usize {
        self.seq
    }

    /// The tokens committed so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Speculative decoding's statistics so far (`None` without a speculator).
    pub fn spec_report(&self) -> Option<SpecReport> {
        self.spec.as_ref().map(Speculation::report)
    }

    /// The speculator, given back (e.g. to save an n-gram cache after the generation).
    pub fn into_speculator(self) -> Option<SpeculatorChain> {
        self.spec.map(Speculation::into_chain)
    }

    fn advance(&mut self, ctx: &mut Context, clock: &dyn Clock) -> Result<Step, GenerateError> {
        if !matches!(self.phase, Phase::Finished) {
            if let Some(token) = self.verified.pop_front() {
                return Ok(self.emit(token, clock));
            }
        }
        match self.phase {
            Phase::Finished => {
                return Err(EngineError::InvalidArgument("the generation has ended".into()).into())
            }
            Phase::Prefill(from) => return self.prefill(ctx, from, clock),
            Phase::Decode(token) => {
                if self.grammar_complete() {
                    // Nothing may follow: the token is not decoded.
                    return Ok(self.done(StopReason::GrammarComplete, String::new(), clock));
                }
                if ctx.n_past() + 1 > ctx.n_ctx() {
                    match self.shift_keep {
                        // As llama.cpp: keep n_keep, drop half of what follows.
                        Some(keep) => {
                            let n_past = ctx.n_past();
                            let keep = keep.min(n_past - 1);
                            ctx.shift(keep, ((n_past - keep) / 2).max(1))?;
                        }
                        None => {
                            return Ok(self.done(StopReason::ContextFull, String::new(), clock))
                        }
                    }
                }
                if let Some(step) = self.speculative_step(ctx, token, clock)? {
                    return Ok(step);
                }
                if self.decode_step(ctx, &[token])?.is_pending() {
                    return Ok(Step::Pending);
                }
                if let Some(spec) = &mut self.spec {
                    spec.decoded(token);
                }
            }
            Phase::FirstToken => {}
        }
        self.pick_next(ctx, clock)
    }

    /// The end of a step whose logits are in the context (or whose token the device picked):
    /// picks the next token and hands it out.
    fn pick_next(&mut self, ctx: &Context, clock: &dyn Clock) -> Result<Step, GenerateError> {
        if self.max_tokens_reached() {
            return Ok(self.done(StopReason::MaxTokens, String::new(), clock));
        }
        let token = match (self.next.take(), &mut self.guide) {
            (Some(t), _) => t,
            (None, None) => self.sampler.sample(ctx.logits())?,
            (None, Some(guide)) => {
                let allowed = guide.allowed()?;
                let token = self
                    .sampler
                    .sample_allowed(ctx.logits(), allowed.as_deref())?;
                guide.commit(token, self.model.tokenizer())?;
                token
            }
        };
        self.sampler.accept(token);
        Ok(self.emit(token, clock))
    }

    /// Whether the grammar allows nothing more (the generation ends without another token).
    fn grammar_complete(&self) -> bool {
        self.guide.as_ref().is_some_and(Guide::is_done)
    }

    fn max_tokens_reached(&self) -> bool {
        self.params
            .max_tokens
            .is_some_and(|m| self.tokens.len() >= m)
    }
}

/// A prompt must be non-empty, fit the context and hold known ids.
pub fn check_sequence(ctx: &Context, ids: &[u32]) -> Result<(), GenerateError> {
    if ids.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if ids.len() > ctx.n_ctx() {
        return Err(GenerateError::PromptTooLong {
            n_prompt: ids.len(),
            n_ctx: ctx.n_ctx(),
        });
    }
    let n_vocab = ctx.model().n_vocab();
    if let Some(&id) = ids.iter().find(|&&id| id as usize >= n_vocab) {
        return Err(EngineError::BadToken { id, n_vocab }.into());
    }
    Ok(())
}
