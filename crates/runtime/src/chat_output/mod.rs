//! The model's answer read as OpenAI's assistant message: `content`, `reasoning_content` and
//! `tool_calls`. Each model family writes its thinking and its tool calls its own way (its
//! chat template shows which: [`OutputFormat::detect`]); [`parse`] reads a whole answer or
//! one cut off mid-way, and [`StreamParser`] turns a streaming answer into deltas whose sum
//! is always the parse of the text so far.
//!
//! What is parsed is the answer as the model continues it: when the generation prompt opens
//! a thinking block (Qwen3's `<think>\n`), the answer starts inside it
//! ([`ParseOptions::prompt_opens_reasoning`]).

mod format;
mod generic;
mod hermes;
mod json_scan;
mod openai;
mod reasoning;
mod stream;

pub use format::{OutputFormat, ThinkTags, ToolSyntax};
pub use generic::{answer_schema, system_prompt};
pub use stream::{whole, Delta, StreamParser, ToolCallDelta};

use serde::{Deserialize, Serialize};

/// An assistant message read from the model's output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChatOutput {
    pub content: String,
    pub reasoning_content: String,
    pub tool_calls: Vec<ToolCall>,
}

/// A call the model made: the function's name and its arguments' JSON text as the model wrote
/// it (`id` empty when the format carries none: the host names the call).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Where the thinking goes (llama-server's `reasoning_format`): `none` leaves it in `content`,
/// tags included; `deepseek` and `auto` move it to `reasoning_content`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReasoningFormat {
    None,
    #[default]
    Auto,
    Deepseek,
    /// llama-server's older name: reasoning in `reasoning_content` and in `content`.
    DeepseekLegacy,
}

/// How one request's answer is read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParseOptions {
    pub reasoning: ReasoningFormat,
    /// The generation prompt ends inside a thinking block: its text from the opening tag
    /// (e.g. `<think>\n`), which belongs to the answer.
    pub prompt_opens_reasoning: Option<String>,
    /// Tools were offered (and not turned off by `tool_choice: none`): calls are read.
    pub tool_calls: bool,
}

/// Reads `text` (the whole answer, or all of it so far when `partial`: then text that may
/// still become a marker is held back, so that what is returned only ever grows).
pub fn parse(
    format: &OutputFormat,
    options: &ParseOptions,
    text: &str,
    partial: bool,
) -> ChatOutput {
    let split = reasoning::split(format.think.as_ref(), options, text, partial);
    let mut out = ChatOutput {
        reasoning_content: split.reasoning,
        ..ChatOutput::default()
    };
    let rest = &split.rest;
    let calls = match (options.tool_calls, format.tools) {
        (true, ToolSyntax::Hermes) => Some(hermes::parse(rest, partial)),
        (true, ToolSyntax::Generic) => Some(generic::parse(rest)),
        _ => None,
    };
    let read_calls = calls.is_some();
    match calls {
        Some(parsed) => {
            out.content = parsed.content;
            out.tool_calls = parsed.calls;
        }
        None => out.content = rest.clone(),
    }
    // Once the answer was split into parts, each part is shown without the whitespace
    // around it (trailing whitespace is held back while streaming: it may be the end).
    if split.found || read_calls {
        out.content = out.content.trim().to_owned();
    }
    out
}

/// What a tool-call syntax reads from the text after the thinking.
pub(crate) struct Calls {
    pub content: String,
    pub calls: Vec<ToolCall>,
}

/// The longest end of `text` that is the start of `marker` (what a streaming parser holds back:
/// it may become the marker); 0 when none.
pub(crate) fn partial_marker_len(text: &str, marker: &str) -> usize {
    (1..marker.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n)
                && marker
                    .as_bytes()
                    .starts_with(&text.as_bytes()[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
