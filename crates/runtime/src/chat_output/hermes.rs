//! Hermes-style tool calls (Qwen 2.5, Qwen 3, Hermes 2 Pro and 3, SmolLM3): each call is
//! `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, before or after plain text.

use super::json_scan::{object_members, skip_ws, string_member};
use super::{partial_marker_len, Calls, ToolCall};

pub const OPEN: &str = "<tool_call>";
pub const CLOSE: &str = "</tool_call>";

pub fn parse(text: &str, partial: bool) -> Calls {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut pos = 0;
    loop {
        let Some(i) = text[pos..].find(OPEN) else {
            let tail = &text[pos..];
            let hold = if partial {
                partial_marker_len(tail, OPEN)
            } else {
                0
            };
            content.push_str(&tail[..tail.len() - hold]);
            break;
        };
        content.push_str(&text[pos..pos + i]);
        let body = pos + i + OPEN.len();
        let Ok((members, end)) = object_members(text, body) else {
            // Not a call after all: the marker is text.
            content.push_str(OPEN);
            pos = body;
            continue;
        };
        if let Some(call) = json_call(text, &members) {
            calls.push(call);
        }
        let Some(end) = end else { break };
        pos = skip_ws(text, end);
        if text[pos..].starts_with(CLOSE) {
            pos += CLOSE.len();
        } else if partial && CLOSE.starts_with(&text[pos..]) {
            break;
        }
    }
    Calls { content, calls }
}

/// A call from the members of `{"name": ..., "arguments": {...}}` (Llama 3 writes
/// `parameters`), once its name is whole; the arguments are their text as far as it goes.
pub(crate) fn json_call(text: &str, members: &[super::json_scan::Member]) -> Option<ToolCall> {
    let name = string_member(text, members, "name")?;
    let arguments = members
        .iter()
        .find(|m| m.key == "arguments" || m.key == "parameters")
        .map_or(String::new(), |m| text[m.value.clone()].to_owned());
    Some(ToolCall {
        id: string_member(text, members, "id").unwrap_or_default(),
        name,
        arguments,
    })
}
