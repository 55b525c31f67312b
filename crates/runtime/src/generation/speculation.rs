//! Speculative decoding inside a generation: a draft for after the last committed token,
//! verified by the target in one batch, commits the accepted draft tokens and the target's
//! own next token (exactly the tokens plain decoding gives; see `speculative::verify_draft`),
//! handed out one per step.

use tessera_core::context::Context;

use super::params::{Clock, GenerateError};
use super::{Generation, Step};
use crate::speculative::{verify_draft, SpecError, SpeculatorChain};

/// A generation's speculative state.
pub(super) struct Speculation {
    chain: SpeculatorChain,
    /// The tokens in the KV cache (prompt, then committed tokens), which drafts continue.
    history: Vec<u32>,
    n_drafted: usize,
    n_accepted: usize,
    n_steps: usize,
}

/// Speculative decoding's statistics for one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecReport {
    /// Draft tokens verified, and accepted.
    pub n_drafted: usize,
    pub n_accepted: usize,
    /// Target model steps after the prompt (each decodes one token, or verifies a draft).
    pub n_steps: usize,
    /// llama.cpp's lines: the acceptance rate, then one line per speculator.
    pub lines: Vec<String>,
}

impl Speculation {
    pub(super) fn begin(mut chain: SpeculatorChain, prompt: &[u32]) -> Result<Self, SpecError> {
        chain.begin(prompt)?;
        Ok(Speculation {
            chain,
            history: prompt.to_vec(),
            n_drafted: 0,
            n_accepted: 0,
            n_steps: 0,
        })
    }

    /// `token` was decoded alone (no draft).
    pub(super) fn decoded(&mut self, token: u32) {
        self.history.push(token);
        self.n_steps += 1;
    }

    pub(super) fn report(&self) -> SpecReport {
        SpecReport {
            n_drafted: self.n_drafted,
            n_accepted: self.n_accepted,
            n_steps: self.n_steps,
            lines: self.chain.stats_lines(),
        }
    }

    pub(super) fn into_chain(self) -> SpeculatorChain {
        self.chain
    }
}

impl Generation {
    /// With a speculator, a draft for after `token` verified in one batch: `None` when there
    /// is no draft (the step decodes `token` alone).
    pub(super) fn speculative_step(
        &mut self,
        ctx: &mut Context,
        token: u32,
        clock: &dyn Clock,
    ) -> Result<Option<Step>, GenerateError> {
        let Some(spec) = &mut self.spec else {
            return Ok(None);
        };
        let n_past = ctx.n_past();
        // Room for the draft: the context, the batch, and the tokens still wanted (a draft of
        // k commits at most k + 1 tokens).
        let wanted = self
            .params
            .max_tokens
            .map_or(usize::MAX, |m| m.saturating_sub(self.tokens.len()));
        let room = (ctx.n_ctx() - n_past - 1)
            .min(ctx.n_batch().max(1) - 1)
            .min(wanted.saturating_sub(1));
        if room == 0 {
            return Ok(None);
        }
        let draft = spec.chain.draft(&spec.history, token, room)?;
        if draft.is_empty() {
            return Ok(None);
        }
        let mut batch = Vec::with_capacity(draft.len() + 1);
        batch.push(token);
        batch.extend_from_slice(&draft);
        ctx.decode(&batch, true)?;
        let n_vocab = ctx.model().n_vocab();
        let verified = verify_draft(&mut self.sampler, &draft, ctx.all_logits(), n_vocab)?;
        // Keep `token` and the accepted draft tokens; forget the rejected ones.
        ctx.truncate(n_past + 1 + verified.n_accepted);
        spec.chain.accept(verified.n_accepted);
        spec.n_drafted += draft.len();
        spec.n_accepted += verified.n_accepted;
        spec.n_steps += 1;
        spec.history.push(token);
        spec.history
            .extend_from_slice(&verified.tokens[..verified.n_accepted]);
        let (&first, rest) = verified
            .tokens
            .split_first()
            .expect("a verified draft commits at least the target's token");
        self.verified.extend(rest);
        Ok(Some(self.emit(first, clock)))
    }
}
