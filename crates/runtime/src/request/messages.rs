//! Chat messages and the completion prompt as a request carries them, and the chat-template
//! messages they become.

use serde::Deserialize;
use serde_json::Value;
use tessera_tokenizer::chat_template::{ChatMessage, ToolCallFunction, ToolCallMessage};

use super::RequestError;

/// A completion's prompt: text, or (the server) token ids.
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged, expecting = "a string or an array of token ids")]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
}

#[derive(Deserialize, Debug, Clone)]
pub struct Message {
    pub role: String,
    /// `null` or absent for an assistant turn that only called tools.
    pub content: Option<Content>,
    /// The calls an assistant turn made.
    pub tool_calls: Option<Vec<ToolCallIn>>,
    /// The call a `tool` turn answers.
    pub tool_call_id: Option<String>,
    /// The tool's name on a `tool` turn (older clients), or a participant's name.
    pub name: Option<String>,
    /// An assistant turn's thinking (templates that keep it in the history print it).
    pub reasoning_content: Option<String>,
    /// OpenAI's deprecated single call: refused (clients send `tool_calls`).
    pub function_call: Option<Value>,
}

/// A tool call in the history, as OpenAI sends it back: `arguments` is the JSON text.
#[derive(Deserialize, Debug, Clone)]
pub struct ToolCallIn {
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub function: FunctionCallIn,
}

#[derive(Deserialize, Debug, Clone)]
pub struct FunctionCallIn {
    pub name: String,
    /// JSON text (OpenAI), or the object itself (some clients).
    pub arguments: Option<Value>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged, expecting = "a string or an array of content parts")]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize, Debug, Clone)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

/// The conversation as chat-template messages: roles system (or OpenAI's newer `developer`),
/// user, assistant (with the tool calls it made) and tool (a call's result); content a string
/// or text parts, joined with newlines (as llama.cpp's server does for templates that take
/// plain text).
pub fn chat_messages(messages: &[Message]) -> Result<Vec<ChatMessage>, RequestError> {
    if messages.is_empty() {
        return Err(RequestError::new("messages", "'messages' is empty"));
    }
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| chat_message(i, m))
        .collect()
}

fn chat_message(i: usize, m: &Message) -> Result<ChatMessage, RequestError> {
    let at = format!("messages[{i}]");
    if m.function_call.as_ref().is_some_and(|v| !v.is_null()) {
        return Err(RequestError::new(
            format!("{at}.function_call"),
            format!("{at}.function_call is not supported: send tool_calls"),
        ));
    }
    let role = match m.role.as_str() {
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        other => {
            return Err(RequestError::new(
                format!("{at}.role"),
                format!("{at}: unknown role {other:?} (system, user, assistant, tool)"),
            ))
        }
    };
    let content = match &m.content {
        None => String::new(),
        Some(Content::Text(t)) => t.clone(),
        Some(Content::Parts(parts)) => {
            let texts = parts
                .iter()
                .enumerate()
                .map(|(j, p)| match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => Ok(t.as_str()),
                    ("text", None) => Err(RequestError::new(
                        format!("{at}.content[{j}].text"),
                        format!("{at}.content[{j}]: a text part needs a 'text' string"),
                    )),
                    (kind, _) => Err(RequestError::new(
                        format!("{at}.content[{j}]"),
                        format!("{at}.content[{j}]: a {kind:?} part is not supported (only text)"),
                    )),
                });
            texts.collect::<Result<Vec<_>, _>>()?.join("\n")
        }
    };
    let calls = m.tool_calls.as_deref().unwrap_or_default();
    if !calls.is_empty() && role != "assistant" {
        return Err(RequestError::new(
            format!("{at}.tool_calls"),
            format!("{at}: only assistant turns carry tool_calls"),
        ));
    }
    let tool_calls = calls
        .iter()
        .enumerate()
        .map(|(j, c)| tool_call(&format!("{at}.tool_calls[{j}]"), i, j, c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ChatMessage {
        tool_calls,
        tool_call_id: m.tool_call_id.clone(),
        name: m.name.clone(),
        reasoning_content: m.reasoning_content.clone(),
        ..ChatMessage::new(role, content)
    })
}

/// A call of the history as templates take it: the arguments as a JSON object (templates
/// write them with `tojson` or walk their items), an id where the client gave none.
fn tool_call(
    at: &str,
    message: usize,
    index: usize,
    c: &ToolCallIn,
) -> Result<ToolCallMessage, RequestError> {
    if c.kind.as_deref().is_some_and(|k| k != "function") {
        return Err(RequestError::new(
            format!("{at}.type"),
            format!("{at}: only function calls are supported"),
        ));
    }
    let arguments = match &c.function.arguments {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(text)) if text.trim().is_empty() => Value::Object(Default::default()),
        Some(Value::String(text)) => serde_json::from_str(text).map_err(|e| {
            RequestError::new(
                format!("{at}.function.arguments"),
                format!("{at}.function.arguments is not JSON: {e}"),
            )
        })?,
        Some(v) => v.clone(),
    };
    Ok(ToolCallMessage {
        id: c
            .id
            .clone()
            .unwrap_or_else(|| format!("call_{message}_{index}")),
        kind: "function".into(),
        function: ToolCallFunction {
            name: c.function.name.clone(),
            arguments,
        },
    })
}
