//! Tool calls for models whose template knows no tools (SmolLM2, Gemma 3 and most small
//! models): the tools are described in a system message, and the answer is one JSON object,
//! `{"tool_calls": [{"name": ..., "arguments": {...}}]}` or `{"response": "..."}`, which a
//! grammar enforces (llama.cpp's generic format), so that even a small model's answer reads.

use serde_json::{json, Value};

use super::hermes::json_call;
use super::json_scan::{array_items, object_members, string_prefix};
use super::Calls;

pub fn parse(text: &str) -> Calls {
    let whole = |content: &str| Calls {
        content: content.to_owned(),
        calls: Vec::new(),
    };
    let Ok((members, _)) = object_members(text, 0) else {
        // Not the format (the grammar was off): the text is the answer.
        return whole(text);
    };
    let mut calls = Vec::new();
    let mut content = String::new();
    for m in &members {
        let value = &text[m.value.clone()];
        match m.key.as_str() {
            "response" => content = string_prefix(value).unwrap_or_default(),
            "tool_call" => calls.extend(call(text, m.value.start)),
            "tool_calls" => {
                let Ok((items, _)) = array_items(text, m.value.start) else {
                    continue;
                };
                calls.extend(items.iter().filter_map(|r| call(text, r.start)));
            }
            _ => {}
        }
    }
    Calls { content, calls }
}

fn call(text: &str, at: usize) -> Option<super::ToolCall> {
    let (members, _) = object_members(text, at).ok()?;
    json_call(text, &members)
}

/// The system message that describes the tools (appended to the conversation's own).
pub fn system_prompt(tools: &[Value]) -> String {
    let list = serde_json::to_string_pretty(tools).unwrap_or_default();
    format!(
        "You can call these tools:\n{list}\n\nAnswer with one JSON object: {{\"tool_calls\": [{{\"name\": <tool name>, \"arguments\": <its arguments>}}]}} to call tools, or {{\"response\": <your answer>}} to answer directly."
    )
}

/// The JSON schema of the answer: calls to the tools `tools` (name and parameters schema each),
/// at most one unless `parallel`, and the direct answer unless a call is `required`.
pub fn answer_schema(tools: &[(String, Value)], required: bool, parallel: bool) -> Value {
    let call = |(name, parameters): &(String, Value)| {
        json!({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": parameters},
            "required": ["name", "arguments"],
            "additionalProperties": false,
        })
    };
    let mut items = json!({"type": "array", "items": {"anyOf": tools.iter().map(call).collect::<Vec<_>>()}, "minItems": 1});
    if !parallel {
        items["maxItems"] = json!(1);
    }
    let calls = json!({
        "type": "object",
        "properties": {"tool_calls": items},
        "required": ["tool_calls"],
        "additionalProperties": false,
    });
    if required {
        return calls;
    }
    let response = json!({
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
        "additionalProperties": false,
    });
    json!({"anyOf": [calls, response]})
}
