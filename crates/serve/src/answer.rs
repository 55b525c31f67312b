//! A chat answer read into OpenAI's message parts (when the request offered tools, or the
//! model thinks): `content`, `reasoning_content` and `tool_calls`, whole or as stream deltas.

use serde_json::{json, Map, Value};
use tessera_runtime::chat_output::{
    self, ChatOutput, Delta, OutputFormat, ParseOptions, StreamParser,
};
use tessera_runtime::constraint::Grammar;
use tessera_runtime::generate::StopReason;

/// What a chat request adds to its generation: the tool calls' grammar, and how its answer
/// is read (`None`: plain content).
#[derive(Default)]
pub struct ChatPlan {
    pub grammar: Option<Grammar>,
    pub output: Option<(OutputFormat, ParseOptions)>,
}

/// How one answer is read, and the number that names its calls.
pub struct Reading {
    pub format: OutputFormat,
    pub options: ParseOptions,
    /// The response's number: a call the model gives no id is `call_{number}_{index}`.
    pub number: u64,
}

impl Reading {
    pub fn stream(&self) -> StreamParser {
        let n = self.number;
        StreamParser::new(self.format.clone(), self.options.clone(), move |i| {
            format!("call_{n}_{i}")
        })
    }

    pub fn whole(&self, text: &str) -> ChatOutput {
        let n = self.number;
        chat_output::whole(&self.format, &self.options, text, |i| {
            format!("call_{n}_{i}")
        })
    }
}

/// The assistant message of a whole answer (`content` null when the answer only calls tools,
/// as OpenAI's).
pub fn message(out: &ChatOutput) -> Value {
    let mut m = json!({"role": "assistant", "content": out.content});
    if out.content.is_empty() && !out.tool_calls.is_empty() {
        m["content"] = Value::Null;
    }
    if !out.reasoning_content.is_empty() {
        m["reasoning_content"] = json!(out.reasoning_content);
    }
    if !out.tool_calls.is_empty() {
        m["tool_calls"] = out.tool_calls.iter().map(|c| c.to_openai()).collect();
    }
    m
}

/// A stream delta's fields (only those it has).
pub fn delta(d: &Delta) -> Map<String, Value> {
    let mut m = Map::new();
    if !d.content.is_empty() {
        m.insert("content".into(), json!(d.content));
    }
    if !d.reasoning_content.is_empty() {
        m.insert("reasoning_content".into(), json!(d.reasoning_content));
    }
    if !d.tool_calls.is_empty() {
        let calls = d.tool_calls.iter().map(|c| {
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

/// OpenAI's finish reason: `tool_calls` when an answer that ended by itself called tools.
pub fn finish_reason(stop: StopReason, called_tools: bool) -> &'static str {
    match stop {
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        _ if called_tools => "tool_calls",
        StopReason::EndOfGeneration(_)
        | StopReason::StopString(_)
        | StopReason::Cancelled
        | StopReason::GrammarComplete => "stop",
    }
}
