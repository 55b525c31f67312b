//! Messages and deltas in the OpenAI API's JSON shape, as the server and the browser answer.

use serde_json::{json, Map, Value};

use super::{ChatOutput, Delta, ToolCall};

impl ToolCall {
    /// `{id, type: "function", function: {name, arguments}}`.
    pub fn to_openai(&self) -> Value {
        json!({
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        })
    }
}

impl ChatOutput {
    /// The assistant message (`content` null when the answer only calls tools, as OpenAI's).
    pub fn to_openai(&self) -> Value {
        let mut m = json!({"role": "assistant", "content": self.content});
        if self.content.is_empty() && !self.tool_calls.is_empty() {
            m["content"] = Value::Null;
        }
        if !self.reasoning_content.is_empty() {
            m["reasoning_content"] = json!(self.reasoning_content);
        }
        if !self.tool_calls.is_empty() {
            m["tool_calls"] = self.tool_calls.iter().map(ToolCall::to_openai).collect();
        }
        m
    }
}

impl Delta {
    /// A stream chunk's `delta` fields (only those it has; a call's id, type and name in its
    /// first piece).
    pub fn to_openai(&self) -> Map<String, Value> {
        let mut m = Map::new();
        if !self.content.is_empty() {
            m.insert("content".into(), json!(self.content));
        }
        if !self.reasoning_content.is_empty() {
            m.insert("reasoning_content".into(), json!(self.reasoning_content));
        }
        if !self.tool_calls.is_empty() {
            let calls = self.tool_calls.iter().map(|c| {
                let mut call = json!({"index": c.index, "function": {"arguments": c.arguments}});
                if let Some(id) = &c.id {
                    call["id"] = json!(id);
                    call["type"] = json!("function");
                }
                if let Some(name) = &c.name {
                    call["function"]["name"] = json!(name);
                }
                call
            });
            m.insert("tool_calls".into(), calls.collect());
        }
        m
    }
}
