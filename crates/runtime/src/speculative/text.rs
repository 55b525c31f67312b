//! Text generation with speculative decoding: the same contract as
//! [`crate::generate::generate`] (sampler primed with the prompt, `ignore_eos`, streamed UTF-8,
//! stop strings, statistics), with the tokens coming from the speculative loop.

use super::{decode_prompt, generate_after_prompt, GenerateOptions, SpeculatorChain, StopReason};
use tessera_core::context::Context;
use crate::generate::{
    prompt_sampler, Clock, GenerateError, GenerateParams, GenerateStats, StopReason as TextStop,
};
use crate::speculative::SpecError;
use crate::stop::StopMatcher;
use tessera_tokenizer::StreamDecoder;

impl From<SpecError> for GenerateError {
    fn from(e: SpecError) -> Self {
        match e {
            SpecError::Engine(e) => GenerateError::Engine(e),
            SpecError::Sampling(e) => GenerateError::Sampling(e),
            other => GenerateError::Engine(tessera_core::error::EngineError::InvalidArgument(
                other.to_string(),
            )),
        }
    }
}

/// Generates after `prompt` with `chain` drafting. With greedy sampling the text is the one
/// [`crate::generate::generate`] produces. The whole prompt is decoded (no prefix reuse).
pub fn generate_text(
    ctx: &mut Context,
    prompt: &[u32],
    params: &GenerateParams,
    chain: &mut SpeculatorChain,
    clock: &dyn Clock,
    on_text: &mut dyn FnMut(&str) -> bool,
) -> Result<GenerateStats, GenerateError> {
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if prompt.len() > ctx.n_ctx() {
        return Err(GenerateError::PromptTooLong {
            n_prompt: prompt.len(),
            n_ctx: ctx.n_ctx(),
        });
    }
    let model = ctx.model().clone();
    let tokenizer = model.tokenizer();
    let mut sampler = prompt_sampler(params, tokenizer, prompt)?;
    let t0 = clock.now_s();
    decode_prompt(ctx, prompt)?;
    let t1 = clock.now_s();

    let mut decoder = StreamDecoder::new(tokenizer, false);
    let mut stops = StopMatcher::new(&params.stop);
    let mut stopped_by: Option<TextStop> = None;
    let opts = GenerateOptions {
        n_predict: params.max_tokens.unwrap_or(usize::MAX),
    };
    let generation = generate_after_prompt(
        ctx,
        &mut sampler,
        Some(chain),
        prompt,
        &opts,
        |t| !params.ignore_eos && tokenizer.is_eog(t),
        |t| {
            let out = stops.push(&decoder.push(t));
            if !out.text.is_empty() && !on_text(&out.text) {
                stopped_by = Some(TextStop::Cancelled);
                return false;
            }
            if let Some(i) = out.stopped {
                stopped_by = Some(TextStop::StopString(i));
                return false;
            }
            true
        },
    )?;
    let mut tokens = generation.tokens;
    let stop = match (stopped_by, generation.stop) {
        (Some(s), _) => s,
        (None, StopReason::EndOfGeneration(t)) => {
            tokens.push(t);
            TextStop::EndOfGeneration(t)
        }
        (None, StopReason::MaxTokens) => TextStop::MaxTokens,
        (None, StopReason::ContextFull) => TextStop::ContextFull,
        (None, StopReason::Callback) => TextStop::Cancelled,
    };
    if !matches!(stop, TextStop::StopString(_) | TextStop::Cancelled) {
        let rest = stops.push(&decoder.finish());
        let mut tail = rest.text;
        if rest.stopped.is_none() {
            tail.push_str(&stops.finish());
        }
        if !tail.is_empty() {
            on_text(&tail);
        }
    }
    let t2 = clock.now_s();
    Ok(GenerateStats {
        n_prompt_eval: prompt.len(),
        n_prompt: prompt.len(),
        n_generated: tokens.len(),
        prompt_s: t1 - t0,
        generate_s: t2 - t1,
        stop,
        tokens,
    })
}
