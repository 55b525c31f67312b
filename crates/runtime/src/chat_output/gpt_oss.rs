//! gpt-oss's harmony format: the answer is a run of messages, each
//! `<|start|>assistant HEADER<|message|>BODY<|end|>` (the first without `<|start|>assistant`,
//! which the generation prompt holds). The header names a channel (`<|channel|>analysis`:
//! thinking; `final`, `commentary`: the answer) and may address the message
//! (` to=functions.NAME`: a call, its body the arguments; another recipient, a built-in tool
//! such as `python` or `container.exec`: dropped, there is no tool of that name to call).

use super::{partial_any, ChatOutput, Markers, ParseOptions, ReasoningFormat, ToolCall};

const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const MESSAGE: &str = "<|message|>";
/// What ends a message's body.
const BODY_ENDS: [&str; 4] = ["<|end|>", "<|call|>", "<|return|>", START];
const ROLE: &str = "assistant";
const FUNCTIONS: &str = "functions.";

pub fn parse(options: &ParseOptions, text: &str, partial: bool) -> ChatOutput {
    let mut out = ChatOutput::default();
    let mut body_ends = Markers::new(text, &BODY_ENDS);
    let mut pos = 0;
    while pos < text.len() {
        // The header: from after `<|start|>assistant` to `<|message|>`.
        let mut from = pos;
        let started = text[pos..].starts_with(START);
        if started {
            let after = &text[pos + START.len()..];
            from = pos + START.len() + (after.len() - after.trim_start_matches(ROLE).len());
        } else if partial && START.starts_with(&text[pos..]) {
            break;
        }
        let Some(header_len) = text[from..].find(MESSAGE) else {
            // A header cut off shows nothing; text outside the format is the answer.
            if !started && !looks_like_header(&text[from..]) {
                plain(&mut out.content, &text[from..], partial);
            }
            break;
        };
        let header = &text[from..from + header_len];
        let body_from = from + header_len + MESSAGE.len();
        let (body_to, next, end_marker) = match body_ends.find(body_from) {
            Some((at, k)) if BODY_ENDS[k] == START => (at, Some(at), ""),
            Some((at, k)) => (at, Some(at + BODY_ENDS[k].len()), BODY_ENDS[k]),
            None if partial => (
                text.len() - partial_any(&text[body_from..], &BODY_ENDS),
                None,
                "",
            ),
            None => (text.len(), None, ""),
        };
        let body = &text[body_from..body_to];
        match (recipient(header), channel(header)) {
            (Some(to), _) if to.starts_with(FUNCTIONS) => {
                if options.tool_calls {
                    out.tool_calls.push(ToolCall {
                        id: String::new(),
                        name: to[FUNCTIONS.len()..].to_owned(),
                        arguments: body.trim_start().to_owned(),
                    });
                }
            }
            (Some(to), _) if to != ROLE => {}
            (_, "analysis") if options.reasoning == ReasoningFormat::None => {
                // The thinking stays in the answer as written.
                out.content.push_str(&text[from..body_to]);
                out.content.push_str(end_marker);
            }
            (_, "analysis") => {
                if !out.reasoning_content.is_empty() && !body.is_empty() {
                    out.reasoning_content.push('\n');
                }
                out.reasoning_content.push_str(body);
            }
            _ => out.content.push_str(body),
        }
        match next {
            Some(next) => pos = next,
            None => break,
        }
    }
    out.content = out.content.trim().to_owned();
    out.reasoning_content = out.reasoning_content.trim().to_owned();
    out
}

/// Whether `text` (no `<|message|>` in it) may be a header still being written.
fn looks_like_header(text: &str) -> bool {
    let t = text.trim_start();
    ["<|", "to="]
        .iter()
        .any(|start| t.starts_with(start) || start.starts_with(t))
}

/// Text outside any message, less what may still become a marker.
fn plain(content: &mut String, text: &str, partial: bool) {
    let hold = if partial {
        partial_any(text, &[START, CHANNEL])
    } else {
        0
    };
    content.push_str(&text[..text.len() - hold]);
}

/// The header's ` to=RECIPIENT`.
fn recipient(header: &str) -> Option<&str> {
    let at = header.find("to=")?;
    let rest = &header[at + 3..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '<')
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The header's channel: the word after its last `<|channel|>`.
fn channel(header: &str) -> &str {
    let Some(at) = header.rfind(CHANNEL) else {
        return "";
    };
    let rest = &header[at + CHANNEL.len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '<')
        .unwrap_or(rest.len());
    &rest[..end]
}
