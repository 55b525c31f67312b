//! Gemma 4: thinking on a channel, `<|channel>thought\n...<channel|>`, and calls
//! `<|tool_call>call:NAME{key:value,...}<tool_call|>` whose arguments are written the way
//! its template writes values: bare keys, strings between `<|"|>` quotes, numbers, `true`,
//! `false`, `null`, nested `{...}` and `[...]`. The arguments are turned into JSON as they
//! come, so that their text only ever grows while streaming. Stray channel markers (an empty
//! thought block at the end, a doubled opening, a lone closing) are not part of the answer.

use super::ToolCall;
use super::{partial_marker_len, ChatOutput, Markers, ParseOptions, ReasoningFormat};

pub const THOUGHT: &str = "<|channel>thought";
pub const CHANNEL_CLOSE: &str = "<channel|>";
const CHANNEL_OPEN: &str = "<|channel>";
const CALL_OPEN: &str = "<|tool_call>";
const CALL_CLOSE: &str = "<tool_call|>";
const CALL_PREFIX: &str = "call:";
const QUOTE: &str = "<|\"|>";

pub fn parse(options: &ParseOptions, text: &str, partial: bool) -> ChatOutput {
    let opened = options.prompt_opens_reasoning.as_deref().unwrap_or("");
    let text = &format!("{opened}{text}");
    let channels = options.reasoning != ReasoningFormat::None;
    let mut out = ChatOutput::default();
    let mut live: Vec<&str> = Vec::new();
    if channels {
        live.extend([CHANNEL_OPEN, CHANNEL_CLOSE]);
    }
    if options.tool_calls {
        live.push(CALL_OPEN);
    }
    let mut found = Markers::new(text, &live);
    let mut pos = 0;
    while let Some((at, k)) = found.text_until(&mut out.content, pos, partial) {
        let marker = live[k];
        pos = at + marker.len();
        match marker {
            CHANNEL_OPEN => {
                // Any doubled opening, then the channel's name and its body.
                while text[pos..].starts_with(CHANNEL_OPEN) {
                    pos += CHANNEL_OPEN.len();
                }
                let rest = &text[pos..];
                if partial && CHANNEL_OPEN.starts_with(rest) {
                    break;
                }
                let name_len = rest.find(['\n', '<']).unwrap_or(rest.len());
                if partial && name_len == rest.len() {
                    break;
                }
                pos += name_len;
                if text[pos..].starts_with('\n') {
                    pos += 1;
                }
                let body = &text[pos..];
                match body.find(CHANNEL_CLOSE) {
                    Some(i) => {
                        push_thought(&mut out.reasoning_content, &body[..i]);
                        pos += i + CHANNEL_CLOSE.len();
                    }
                    None => {
                        let hold = if partial {
                            partial_marker_len(body, CHANNEL_CLOSE)
                        } else {
                            0
                        };
                        push_thought(&mut out.reasoning_content, &body[..body.len() - hold]);
                        break;
                    }
                }
            }
            CHANNEL_CLOSE => {} // A closing with nothing open.
            _ => match call(text, pos, partial) {
                Some((c, end)) => {
                    out.tool_calls.push(c);
                    match end {
                        Some(end) => pos = end,
                        None => break,
                    }
                }
                None if partial && may_become_call(&text[pos..]) => break,
                None => out.content.push_str(CALL_OPEN),
            },
        }
    }
    if channels || options.tool_calls {
        out.content = out.content.trim().to_owned();
    }
    out.reasoning_content = out.reasoning_content.trim().to_owned();
    out
}

/// Whether the text after `<|tool_call>` may still become `call:NAME{`.
fn may_become_call(rest: &str) -> bool {
    CALL_PREFIX.starts_with(rest)
        || rest
            .strip_prefix(CALL_PREFIX)
            .is_some_and(|name| !name.contains(['{', '<', '\n']))
}

fn push_thought(reasoning: &mut String, thought: &str) {
    if !reasoning.is_empty() && !thought.trim().is_empty() {
        reasoning.push('\n');
    }
    reasoning.push_str(thought);
}

/// The call after `<|tool_call>` (at `at`), and where the text after it starts (none when
/// the text ends inside it); `None` while its name is not whole, or when it is no call.
fn call(text: &str, at: usize, partial: bool) -> Option<(ToolCall, Option<usize>)> {
    let rest = &text[at..];
    let named = rest.strip_prefix(CALL_PREFIX)?;
    let brace = named.find('{')?;
    let name = named[..brace].trim();
    if name.is_empty() || name.contains(['<', '\n']) {
        return None;
    }
    let args_from = at + CALL_PREFIX.len() + brace;
    let (arguments, args_end) = to_json(text, args_from, partial);
    let call = ToolCall {
        id: String::new(),
        name: name.to_owned(),
        arguments,
    };
    let Some(args_end) = args_end else {
        return Some((call, None));
    };
    let after = &text[args_end..];
    let end = if after.starts_with(CALL_CLOSE) {
        Some(args_end + CALL_CLOSE.len())
    } else if partial && CALL_CLOSE.starts_with(after) {
        None
    } else {
        Some(args_end)
    };
    Some((call, end))
}

/// Gemma's value syntax from `text[from]` (a `{`) as JSON text, as far as it is sure, and
/// where the value ends (none when the text ends first). Linear: one pass, a stack of open
/// brackets no deeper than the text.
fn to_json(text: &str, from: usize, partial: bool) -> (String, Option<usize>) {
    let mut out = String::new();
    // Open brackets: true for an object, whose next item is a key.
    let mut stack: Vec<bool> = Vec::new();
    let mut expect_key = false;
    let mut pos = from;
    let b = text.as_bytes();
    while pos < b.len() {
        let rest = &text[pos..];
        if rest.starts_with(QUOTE) {
            let body_from = pos + QUOTE.len();
            let Some(len) = text[body_from..].find(QUOTE) else {
                if !expect_key {
                    let body = &text[body_from..];
                    let body = if partial {
                        &body[..body.len() - partial_marker_len(body, QUOTE)]
                    } else {
                        body
                    };
                    let quoted = serde_json::to_string(body).unwrap_or_default();
                    out.push_str(if partial {
                        &quoted[..quoted.len() - 1]
                    } else {
                        &quoted
                    });
                }
                return (out, None);
            };
            out.push_str(
                &serde_json::to_string(&text[body_from..body_from + len]).unwrap_or_default(),
            );
            pos = body_from + len + QUOTE.len();
            if expect_key {
                pos = skip_spaces(text, pos);
                if b.get(pos) == Some(&b':') {
                    out.push(':');
                    pos += 1;
                }
                expect_key = false;
            }
            continue;
        }
        match b[pos] {
            b'{' | b'[' => {
                let object = b[pos] == b'{';
                out.push(b[pos] as char);
                stack.push(object);
                expect_key = object;
                pos += 1;
            }
            b'}' | b']' => {
                out.push(if stack.pop() == Some(true) { '}' } else { ']' });
                pos += 1;
                expect_key = false;
                if stack.is_empty() {
                    return (out, Some(pos));
                }
            }
            b',' => {
                out.push(',');
                pos += 1;
                expect_key = stack.last() == Some(&true);
            }
            b' ' | b'\n' | b'\r' | b'\t' => pos += 1,
            _ if expect_key => {
                // A bare key, up to its `:`.
                let Some(len) = rest.find(':') else {
                    return (out, None);
                };
                out.push_str(&serde_json::to_string(rest[..len].trim()).unwrap_or_default());
                out.push(':');
                pos += len + 1;
                expect_key = false;
            }
            _ => {
                // A bare value, up to the next `,`, `}` or `]`.
                let Some(len) = rest.find([',', '}', ']']) else {
                    if !partial {
                        out.push_str(&bare_value(rest));
                    }
                    return (out, None);
                };
                out.push_str(&bare_value(&rest[..len]));
                pos += len;
            }
        }
    }
    (out, None)
}

fn skip_spaces(text: &str, pos: usize) -> usize {
    pos + (text[pos..].len() - text[pos..].trim_start().len())
}

/// A bare value: a JSON number or literal as written, anything else as a string.
fn bare_value(word: &str) -> String {
    let word = word.trim();
    match serde_json::from_str::<serde_json::Value>(word) {
        Ok(v) if !v.is_string() => word.to_owned(),
        _ => serde_json::to_string(word).unwrap_or_default(),
    }
}
