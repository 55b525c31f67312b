//! Llama 3.1-3.3 tool calls: the answer is a JSON object `{"name": ..., "parameters": {...}}`
//! (optionally after `<|python_tag|>`), or several separated by `;`. The object is a call
//! only when it names an offered tool and has no other members; else it is the answer.

use serde_json::Value;

use super::hermes::json_call;
use super::json_scan::{object_members, skip_ws};
use super::{partial_marker_len, Calls};

const PYTHON_TAG: &str = "<|python_tag|>";
/// The members a call object may have.
const CALL_KEYS: [&str; 4] = ["name", "parameters", "arguments", "type"];

pub fn parse(text: &str, tools: &[Value], partial: bool) -> Calls {
    let answer = |content: &str| Calls {
        content: content.to_owned(),
        calls: Vec::new(),
    };
    let held = answer("");
    let lead = skip_ws(text, 0);
    let mut pos = lead;
    if text[pos..].starts_with(PYTHON_TAG) {
        pos = skip_ws(text, pos + PYTHON_TAG.len());
    } else if partial && partial_marker_len(&text[pos..], PYTHON_TAG) == text.len() - pos {
        return held;
    }
    let mut calls = Vec::new();
    while let Ok((members, end)) = object_members(text, pos) {
        if members.is_empty() && end.is_none() {
            // `{` or nothing yet (after a tag or a `;`).
            return if partial || !calls.is_empty() {
                Calls {
                    content: String::new(),
                    calls,
                }
            } else {
                answer(text)
            };
        }
        let foreign = members
            .iter()
            .any(|m| m.complete && !CALL_KEYS.contains(&m.key.as_str()));
        let call = json_call(text, &members);
        let known = call.as_ref().is_some_and(|c| {
            tools.is_empty()
                || tools.iter().any(|t| {
                    t.get("function")
                        .unwrap_or(t)
                        .get("name")
                        .and_then(Value::as_str)
                        == Some(c.name.as_str())
                })
        });
        match (call, end) {
            (Some(c), _) if known && !foreign => {
                calls.push(c);
                let Some(end) = end else {
                    return Calls {
                        content: String::new(),
                        calls,
                    };
                };
                pos = skip_ws(text, end);
                if text[pos..].starts_with(';') {
                    pos = skip_ws(text, pos + 1);
                } else {
                    // What follows the calls is text.
                    return Calls {
                        content: text[pos..].to_owned(),
                        calls,
                    };
                }
            }
            (None, None) if partial && !foreign => {
                // May still become a call: nothing more to show yet.
                return Calls {
                    content: String::new(),
                    calls,
                };
            }
            _ => break,
        }
    }
    if calls.is_empty() {
        answer(text)
    } else {
        Calls {
            content: text[pos..].to_owned(),
            calls,
        }
    }
}
