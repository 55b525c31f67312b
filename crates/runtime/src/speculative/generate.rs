//! The token-level speculative loop over any [`SpecContext`], plain or speculative (the same
//! loop, so their outputs can be compared): the measuring harness of `tessera spec-bench` and
//! of the tests with small fake models. Text generation with a speculator is the
//! [`Generation`](crate::generation::Generation) state machine.

use super::{verify_draft, SpecContext, SpecError, SpeculatorChain};
use crate::generate::StopReason;
use tessera_core::sampling::Sampler;

/// Limits of one generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateOptions {
    /// The most tokens to generate.
    pub n_predict: usize,
}

/// The outcome of [`generate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    pub tokens: Vec<u32>,
    pub stop: StopReason,
    /// Target decode calls after the prompt (one per plain token or verified draft).
    pub n_target_steps: usize,
    /// Draft tokens verified and accepted.
    pub n_drafted: usize,
    pub n_accepted: usize,
}

/// Evaluates `prompt` in a cleared `ctx` (`n_batch` tokens at a time).
pub fn decode_prompt<C: SpecContext + ?Sized>(
    ctx: &mut C,
    prompt: &[u32],
) -> Result<(), SpecError> {
    if prompt.is_empty() {
        return Err(SpecError::InvalidArgument("the prompt is empty".into()));
    }
    let n_ctx = ctx.n_ctx();
    if prompt.len() > n_ctx {
        return Err(SpecError::InvalidArgument(format!(
            "the prompt ({} tokens) does not fit the context ({n_ctx} tokens)",
            prompt.len()
        )));
    }
    ctx.truncate(0)?;
    for chunk in prompt.chunks(ctx.n_batch().max(1)) {
        ctx.decode(chunk, false)?;
    }
    Ok(())
}

/// [`decode_prompt`], then [`generate_after_prompt`].
pub fn generate<C: SpecContext + ?Sized>(
    ctx: &mut C,
    sampler: &mut Sampler,
    spec: Option<&mut SpeculatorChain>,
    prompt: &[u32],
    opts: &GenerateOptions,
    is_eog: impl Fn(u32) -> bool,
    on_token: impl FnMut(u32) -> bool,
) -> Result<Generated, SpecError> {
    if opts.n_predict == 0 {
        return Ok(Generated {
            tokens: Vec::new(),
            stop: StopReason::MaxTokens,
            n_target_steps: 0,
            n_drafted: 0,
            n_accepted: 0,
        });
    }
    decode_prompt(ctx, prompt)?;
    generate_after_prompt(ctx, sampler, spec, prompt, opts, is_eog, on_token)
}

/// Generates after `prompt`, which `ctx` holds already (its last row's logits current), with
/// `sampler`, speculatively when `spec` is given. Each output token goes to `on_token` (return
/// `false` to stop: [`StopReason::Cancelled`]) in the order plain decoding would produce it.
/// The sampler is not primed with the prompt (callers that use penalties `accept` the prompt
/// tokens first).
pub fn generate_after_prompt<C: SpecContext + ?Sized>(
    ctx: &mut C,
    sampler: &mut Sampler,
    mut spec: Option<&mut SpeculatorChain>,
    prompt: &[u32],
    opts: &GenerateOptions,
    is_eog: impl Fn(u32) -> bool,
    mut on_token: impl FnMut(u32) -> bool,
) -> Result<Generated, SpecError> {
    let (n_ctx, n_batch) = (ctx.n_ctx(), ctx.n_batch().max(1));
    if ctx.n_past() != prompt.len() || prompt.is_empty() {
        return Err(SpecError::InvalidArgument(format!(
            "the context holds {} tokens, the prompt has {}",
            ctx.n_past(),
            prompt.len()
        )));
    }
    let mut out = Generated {
        tokens: Vec::new(),
        stop: StopReason::MaxTokens,
        n_target_steps: 0,
        n_drafted: 0,
        n_accepted: 0,
    };
    if opts.n_predict == 0 {
        return Ok(out);
    }
    if let Some(spec) = spec.as_deref_mut() {
        spec.begin(prompt)?;
    }
    let mut history = prompt.to_vec();
    let mut pending = vec![sampler.sample(ctx.last_logits())?];
    sampler.accept(pending[0]);

    loop {
        // Emit what the last step committed, exactly as plain decoding would, one by one.
        for &t in &pending {
            let stop = if is_eog(t) {
                Some(StopReason::EndOfGeneration(t))
            } else {
                out.tokens.push(t);
                if !on_token(t) {
                    Some(StopReason::Cancelled)
                } else if out.tokens.len() >= opts.n_predict {
                    Some(StopReason::MaxTokens)
                } else {
                    None
                }
            };
            if let Some(stop) = stop {
                out.stop = stop;
                return Ok(out);
            }
        }
        let last = *pending.last().expect("every step commits a token");
        // The committed tokens before `last` are in the KV cache already.
        history.extend_from_slice(&pending[..pending.len() - 1]);
        let n_past = ctx.n_past();
        debug_assert_eq!(n_past, history.len());
        if n_past + 1 > n_ctx {
            out.stop = StopReason::ContextFull;
            return Ok(out);
        }
        // Room for drafts: the context, the batch, and the tokens still wanted (a draft of k
        // commits at most k + 1 tokens).
        let room = (n_ctx - n_past - 1)
            .min(n_batch - 1)
            .min(opts.n_predict - out.tokens.len() - 1);
        let draft = match spec.as_deref_mut() {
            Some(spec) if room > 0 => spec.draft(&history, last, room)?,
            _ => Vec::new(),
        };
        out.n_target_steps += 1;
        if draft.is_empty() {
            ctx.decode(&[last], false)?;
            let t = sampler.sample(ctx.last_logits())?;
            sampler.accept(t);
            history.push(last);
            pending = vec![t];
            continue;
        }
        let mut batch = Vec::with_capacity(draft.len() + 1);
        batch.push(last);
        batch.extend_from_slice(&draft);
        ctx.decode(&batch, true)?;
        let verified = verify_draft(sampler, &draft, ctx.all_logits(), ctx.n_vocab())?;
        // Keep `last` and the accepted draft tokens; forget the rejected ones.
        ctx.truncate(n_past + 1 + verified.n_accepted)?;
        out.n_drafted += draft.len();
        out.n_accepted += verified.n_accepted;
        if let Some(spec) = spec.as_deref_mut() {
            spec.accept(verified.n_accepted);
        }
        history.push(last);
        pending = verified.tokens;
    }
}
