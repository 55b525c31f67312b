//! The model's answer read as OpenAI's assistant message: `content`, `reasoning_content` and
//! `tool_calls`. Each model family writes its thinking and its tool calls its own way (its
//! chat template shows which: [`OutputFormat::detect`]); [`parse`] reads a whole answer or
//! one cut off mid-way, and [`StreamParser`] turns a streaming answer into deltas whose sum
//! is always the parse of the text so far.
//!
//! What is parsed is the answer as the model continues it: when the generation prompt opens
//! a thinking block (Qwen3's `<think>\n`), the answer starts inside it
//! ([`ParseOptions::prompt_opens_reasoning`]).

mod deepseek;
mod format;
mod gemma4;
mod generic;
mod gpt_oss;
pub(crate) mod hermes;
mod json_scan;
mod llama3;
mod mistral;
mod openai;
mod qwen_xml;
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
    /// The tools offered, as OpenAI tool objects (`{"type": "function", "function": {"name",
    /// "parameters"}}`): formats that write argument values as plain text (Qwen3.5's XML)
    /// read them by the parameter's schema type, and Llama 3's bare JSON call must name one.
    pub tools: Vec<serde_json::Value>,
    /// The answer was asked to be JSON (`response_format`): a Markdown code fence around it
    /// is not part of it.
    pub json_response: bool,
}

/// Reads `text` (the whole answer, or all of it so far when `partial`: then text that may
/// still become a marker is held back, so that what is returned only ever grows).
pub fn parse(
    format: &OutputFormat,
    options: &ParseOptions,
    text: &str,
    partial: bool,
) -> ChatOutput {
    let mut out = match format.tools {
        // These formats mark thinking their own way: the whole answer is theirs to read.
        ToolSyntax::GptOss => gpt_oss::parse(options, text, partial),
        ToolSyntax::Gemma4 => gemma4::parse(options, text, partial),
        _ => tagged(format, options, text, partial),
    };
    if options.json_response {
        out.content = unfenced(&out.content, partial);
    }
    out
}

/// An answer whose thinking (if any) comes first, marked by the format's tags, followed by
/// text and calls.
fn tagged(format: &OutputFormat, options: &ParseOptions, text: &str, partial: bool) -> ChatOutput {
    let ended_by = options
        .tool_calls
        .then(|| format.tools.call_ends_thinking())
        .flatten();
    let split = reasoning::split(format.think.as_ref(), ended_by, options, text, partial);
    let mut out = ChatOutput {
        reasoning_content: split.reasoning,
        ..ChatOutput::default()
    };
    let rest = &split.rest;
    let calls = match (options.tool_calls, format.tools) {
        (true, ToolSyntax::Hermes) => Some(hermes::parse(rest, partial)),
        (true, ToolSyntax::Generic) => Some(generic::parse(rest)),
        (true, ToolSyntax::QwenXml) => Some(qwen_xml::parse(rest, &options.tools, partial)),
        (true, ToolSyntax::DeepSeek) => Some(deepseek::parse(rest, partial)),
        (true, ToolSyntax::Mistral) => Some(mistral::parse(rest, partial)),
        (true, ToolSyntax::Llama3) => Some(llama3::parse(rest, &options.tools, partial)),
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

/// A JSON answer less the Markdown code fence a model may put around it (```` ```json ````
/// ... ```` ``` ````); while streaming, a fence that may still be coming is held back.
fn unfenced(content: &str, partial: bool) -> String {
    const FENCE: &str = "```";
    let text = content.trim();
    if partial && FENCE.starts_with(text) {
        return String::new();
    }
    let Some(after) = text.strip_prefix(FENCE) else {
        return content.to_owned();
    };
    let Some(line_end) = after.find('\n') else {
        // The fence's first line (its language) is not whole yet.
        return if partial {
            String::new()
        } else {
            content.to_owned()
        };
    };
    let body = after[line_end + 1..].trim_end();
    let body = match body.strip_suffix(FENCE) {
        Some(inner) => inner,
        None if partial => &body[..body.len() - partial_marker_len(body, FENCE)],
        None => body,
    };
    body.trim().to_owned()
}

/// The longest end of `text` that is the start of any of `markers` (0 when none).
pub(crate) fn partial_any(text: &str, markers: &[&str]) -> usize {
    markers
        .iter()
        .map(|m| partial_marker_len(text, m))
        .max()
        .unwrap_or(0)
}

/// Finds the next of several markers in a text, scanning for each no more than once (each
/// marker's next place is kept until the search passes it), so a parser's loop stays linear.
pub(crate) struct Markers<'a> {
    text: &'a str,
    markers: &'a [&'a str],
    /// Per marker: not searched yet, or its next place at or after the last search (none).
    next: Vec<Option<Option<usize>>>,
}

impl<'a> Markers<'a> {
    pub fn new(text: &'a str, markers: &'a [&'a str]) -> Markers<'a> {
        Markers {
            text,
            markers,
            next: vec![None; markers.len()],
        }
    }

    /// Copies the text from `pos` to the next marker into `content`, and answers where that
    /// marker is and which it is; at the end of the text copies the rest, less (while
    /// streaming) what may still become a marker.
    pub fn text_until(
        &mut self,
        content: &mut String,
        pos: usize,
        partial: bool,
    ) -> Option<(usize, usize)> {
        let found = self.find(pos);
        let end = match found {
            Some((at, _)) => at,
            None => {
                let tail = &self.text[pos..];
                let hold = if partial {
                    partial_any(tail, self.markers)
                } else {
                    0
                };
                self.text.len() - hold
            }
        };
        content.push_str(&self.text[pos..end]);
        found
    }

    /// The first marker at or after `from`: its place and its index in the list.
    pub fn find(&mut self, from: usize) -> Option<(usize, usize)> {
        let mut best = None;
        for (k, marker) in self.markers.iter().enumerate() {
            let stale = match self.next[k] {
                None => true,
                Some(Some(at)) => at < from,
                Some(None) => false,
            };
            if stale {
                let found = self
                    .text
                    .get(from..)
                    .and_then(|rest| rest.find(marker))
                    .map(|i| from + i);
                self.next[k] = Some(found);
            }
            if let Some(Some(at)) = self.next[k] {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, k));
                }
            }
        }
        best
    }
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
