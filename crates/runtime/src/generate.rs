//! Text generation in one call: prompt tokenization (raw text, or chat messages through a
//! template) and [`generate`]: the [`Generation`] state machine of [`crate::generation`] run
//! to its end. The types a generation is described by live there and are re-exported here.

use tessera_core::context::Context;
use tessera_core::error::EngineError;
use tessera_tokenizer::chat_template::{ChatContext, ChatMessage, ChatTemplate};
use tessera_tokenizer::Tokenizer;

pub use crate::generation::{
    prompt_sampler, Clock, GenerateError, GenerateParams, GenerateStats, NoClock, StopReason,
};
use crate::generation::{Generation, GenerationOptions, SpecReport, Step};
use crate::speculative::SpeculatorChain;

/// Tokenizes a raw prompt the way llama.cpp does: special-token text is parsed as special tokens
/// and BOS is added per the model's policy.
pub fn tokenize_prompt(tokenizer: &Tokenizer, text: &str) -> Vec<u32> {
    tokenizer.encode(text, true, true)
}

/// Renders `messages` with the template (opening the assistant's turn) and tokenizes the result:
/// the template's own text with special-token parsing, the messages' contents as plain text
/// ([`tokenize_chat_with`] without `parse_special_in_content`).
pub fn tokenize_chat(
    tokenizer: &Tokenizer,
    template: &ChatTemplate,
    messages: &[ChatMessage],
) -> Result<Vec<u32>, GenerateError> {
    tokenize_chat_with(
        tokenizer,
        template,
        messages,
        &ChatContext::default(),
        false,
    )
}

/// Renders `messages` with the template (opening the assistant's turn), `context` giving it the
/// tools and extra variables, and tokenizes the result. Templates often write the BOS text
/// themselves; it is not doubled.
///
/// Only the template's own markers become control tokens: a content that spells one
/// (`<|im_end|>` typed by a user) is tokenized as the text it is, so that no message can end
/// its turn or open another. When a content holds such text and the template does not write
/// the contents verbatim (or trimmed), Tessera cannot tell the two apart and refuses the
/// conversation ([`GenerateError::ControlTextInContent`]). `parse_special_in_content` turns
/// the contents' control-token text into control tokens too (llama.cpp's behaviour: the
/// whole rendering is tokenized with special-token parsing), for callers that write their
/// own markers into messages.
pub fn tokenize_chat_with(
    tokenizer: &Tokenizer,
    template: &ChatTemplate,
    messages: &[ChatMessage],
    context: &ChatContext,
    parse_special_in_content: bool,
) -> Result<Vec<u32>, GenerateError> {
    let text = template.render_with(messages, true, context)?;
    // Only contents are located in the rendering; control text anywhere else a client wrote
    // (reasoning, tool calls, tool definitions) cannot be kept apart from the template's own.
    if !parse_special_in_content {
        let elsewhere = messages
            .iter()
            .position(|m| tokenizer.has_control_text(&non_content_text(m)));
        if let Some(message) = elsewhere {
            return Err(GenerateError::ControlTextInContent { message });
        }
        let tools = context.tools.as_ref().map(|t| t.to_string());
        if tools.is_some_and(|t| tokenizer.has_control_text(&t)) {
            return Err(GenerateError::ControlTextInTools);
        }
    }
    let spelling = (!parse_special_in_content)
        .then(|| {
            messages
                .iter()
                .position(|m| tokenizer.has_control_text(&m.content))
        })
        .flatten();
    let mut ids = match spelling {
        // Nothing to protect: exactly llama.cpp's tokenization of the rendering.
        None => tokenizer.encode(&text, true, true),
        Some(message) => {
            let spans = template
                .content_spans(messages, true, context, &text)
                .ok_or(GenerateError::ControlTextInContent { message })?;
            tokenizer.encode_with_text_spans(&text, true, &spans)
        }
    };
    if let Some(bos) = tokenizer.bos() {
        if tokenizer.add_bos() && ids.len() >= 2 && ids[0] == bos && ids[1] == bos {
            ids.remove(0);
        }
    }
    Ok(ids)
}

/// What a message gives a template besides its content, as one text (for the control-text check).
fn non_content_text(m: &ChatMessage) -> String {
    let mut text = m.reasoning_content.clone().unwrap_or_default();
    for call in &m.tool_calls {
        text.push_str(&call.id);
        text.push_str(&call.function.name);
        text.push_str(&call.function.arguments.to_string());
    }
    text.push_str(m.tool_call_id.as_deref().unwrap_or(""));
    text.push_str(m.name.as_deref().unwrap_or(""));
    text
}

/// Generates after `prompt` (a [`Generation`] with the default [`GenerationOptions`], run to
/// its end). The context may already hold tokens: the longest common prefix with `prompt` is
/// kept (chat turns re-send the whole history) and only the rest is decoded. `on_text`
/// receives the output as it becomes safe to show (whole UTF-8 characters, never a part of a
/// stop string); returning `false` stops generation. The KV cache afterwards holds the prompt
/// and the generated tokens except the last one sampled. The backend must be synchronous.
pub fn generate(
    ctx: &mut Context,
    prompt: &[u32],
    params: &GenerateParams,
    clock: &dyn Clock,
    on_text: &mut dyn FnMut(&str) -> bool,
) -> Result<GenerateStats, GenerateError> {
    let options = GenerationOptions::default();
    let mut generation = Generation::start(ctx, prompt.to_vec(), params.clone(), options, clock)?;
    Ok(run_to_end(&mut generation, ctx, clock, on_text)?.0)
}

/// [`generate`] with `chain` drafting (speculative decoding never changes the text): the
/// statistics, the speculative report, and the chain given back (its statistics and n-gram
/// cache outlive the generation).
pub fn generate_speculative(
    ctx: &mut Context,
    prompt: &[u32],
    params: &GenerateParams,
    chain: SpeculatorChain,
    clock: &dyn Clock,
    on_text: &mut dyn FnMut(&str) -> bool,
) -> Result<(GenerateStats, SpecReport, SpeculatorChain), GenerateError> {
    let options = GenerationOptions {
        speculator: Some(chain),
        ..GenerationOptions::default()
    };
    let mut generation = Generation::start(ctx, prompt.to_vec(), params.clone(), options, clock)?;
    let (stats, report) = run_to_end(&mut generation, ctx, clock, on_text)?;
    let report = report.or_else(|| generation.spec_report());
    let chain = generation.into_speculator();
    match (report, chain) {
        (Some(report), Some(chain)) => Ok((stats, report, chain)),
        _ => unreachable!("a generation started with a speculator keeps it"),
    }
}

/// Steps `generation` to its end on a synchronous backend, passing its text to `on_text`
/// (returning `false` cancels it). Gives the statistics, and the speculative report when the
/// generation had a speculator.
pub fn run_to_end(
    generation: &mut Generation,
    ctx: &mut Context,
    clock: &dyn Clock,
    on_text: &mut dyn FnMut(&str) -> bool,
) -> Result<(GenerateStats, Option<SpecReport>), GenerateError> {
    loop {
        match generation.step(ctx, clock)? {
            Step::Pending => return Err(EngineError::AsynchronousBackend.into()),
            Step::Prefilled { .. } => {}
            Step::Tokens { text, .. } => {
                if !text.is_empty() && !on_text(&text) {
                    let stats = generation.cancel(clock).expect("a running generation");
                    return Ok((stats, generation.spec_report()));
                }
            }
            Step::Done {
                text,
                stats,
                speculative,
            } => {
                if !text.is_empty() {
                    on_text(&text);
                }
                return Ok((stats, speculative));
            }
        }
    }
}
