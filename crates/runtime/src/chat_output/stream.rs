//! A streaming answer as deltas: each piece of text is parsed with all before it, and what
//! the parse gained is handed out, so that the deltas always add up to the parse so far.

use serde::Serialize;

use super::{parse, ChatOutput, OutputFormat, ParseOptions};

/// What one step added to the message (OpenAI's `delta`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Delta {
    pub content: String,
    pub reasoning_content: String,
    pub tool_calls: Vec<ToolCallDelta>,
}

impl Delta {
    pub fn is_empty(&self) -> bool {
        self.content.is_empty() && self.reasoning_content.is_empty() && self.tool_calls.is_empty()
    }
}

/// A piece of tool call `index`: its id and name when it first appears, then fragments of its
/// arguments' text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolCallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// One answer's parser, fed the text as it is generated.
pub struct StreamParser {
    format: OutputFormat,
    options: ParseOptions,
    text: String,
    shown: ChatOutput,
    /// Names calls that come without an id.
    new_id: Box<dyn FnMut(usize) -> String + Send>,
}

impl StreamParser {
    /// `new_id(i)` names the `i`-th call when the model gives it no id.
    pub fn new(
        format: OutputFormat,
        options: ParseOptions,
        new_id: impl FnMut(usize) -> String + Send + 'static,
    ) -> StreamParser {
        StreamParser {
            format,
            options,
            text: String::new(),
            shown: ChatOutput::default(),
            new_id: Box::new(new_id),
        }
    }

    /// Takes the next piece of text; answers what it adds (empty while it is held back).
    pub fn push(&mut self, piece: &str) -> Delta {
        self.text.push_str(piece);
        let next = parse(&self.format, &self.options, &self.text, true);
        self.advance(next)
    }

    /// The whole message once generation ended, and what the end added.
    pub fn finish(mut self) -> (ChatOutput, Delta) {
        let next = parse(&self.format, &self.options, &self.text, false);
        let delta = self.advance(next);
        (self.shown, delta)
    }

    /// The delta from what was shown to `next`, and `next` (with the ids handed out) shown.
    /// A part that does not extend what was shown (which the parsers avoid by holding text
    /// back) is not taken back: the stream keeps what it sent.
    fn advance(&mut self, mut next: ChatOutput) -> Delta {
        let mut delta = Delta {
            content: gained(&self.shown.content, &next.content),
            reasoning_content: gained(&self.shown.reasoning_content, &next.reasoning_content),
            tool_calls: Vec::new(),
        };
        for (index, call) in next.tool_calls.iter_mut().enumerate() {
            match self.shown.tool_calls.get(index) {
                Some(before) => {
                    call.id = before.id.clone();
                    let arguments = gained(&before.arguments, &call.arguments);
                    if !arguments.is_empty() {
                        delta.tool_calls.push(ToolCallDelta {
                            index,
                            arguments,
                            ..ToolCallDelta::default()
                        });
                    }
                }
                None => {
                    if call.id.is_empty() {
                        call.id = (self.new_id)(index);
                    }
                    delta.tool_calls.push(ToolCallDelta {
                        index,
                        id: Some(call.id.clone()),
                        name: Some(call.name.clone()),
                        arguments: call.arguments.clone(),
                    });
                }
            }
        }
        keep_sent(&mut next, &self.shown);
        self.shown = next;
        delta
    }
}

/// What `next` adds to `before` (nothing when it does not extend it).
fn gained(before: &str, next: &str) -> String {
    next.strip_prefix(before).unwrap_or("").to_owned()
}

/// What was sent stays: a part of `next` that does not extend what was shown keeps the
/// shown text, so later deltas are computed against what the client has.
fn keep_sent(next: &mut ChatOutput, shown: &ChatOutput) {
    let keep = |n: &mut String, s: &String| {
        if !n.starts_with(s.as_str()) {
            *n = s.clone();
        }
    };
    keep(&mut next.content, &shown.content);
    keep(&mut next.reasoning_content, &shown.reasoning_content);
    for (n, s) in next.tool_calls.iter_mut().zip(&shown.tool_calls) {
        keep(&mut n.arguments, &s.arguments);
    }
    // Calls are never taken back either.
    if next.tool_calls.len() < shown.tool_calls.len() {
        next.tool_calls
            .extend(shown.tool_calls[next.tool_calls.len()..].iter().cloned());
    }
}

/// The message a whole answer makes, with ids for calls that have none.
pub fn whole(
    format: &OutputFormat,
    options: &ParseOptions,
    text: &str,
    mut new_id: impl FnMut(usize) -> String,
) -> ChatOutput {
    let mut out = parse(format, options, text, false);
    for (i, call) in out.tool_calls.iter_mut().enumerate() {
        if call.id.is_empty() {
            call.id = new_id(i);
        }
    }
    out
}
