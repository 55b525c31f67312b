//! Chat messages and the completion prompt as a request carries them, and the chat-template
//! messages they become.

use serde::Deserialize;
use serde_json::Value;
use tessera_tokenizer::chat_template::ChatMessage;

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
    /// `null` or absent for an assistant turn that only called tools (refused anyway).
    pub content: Option<Content>,
    // Tool calling's fields: refused until the engine calls tools (the tools issue reads them).
    pub tool_calls: Option<Value>,
    pub tool_call_id: Option<Value>,
    pub function_call: Option<Value>,
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
/// user and assistant; content a string or text parts, joined with newlines (as llama.cpp's
/// server does for templates that take plain text).
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
    let tool_fields = [
        ("tool_calls", &m.tool_calls),
        ("tool_call_id", &m.tool_call_id),
        ("function_call", &m.function_call),
    ];
    // `null` and `[]` ask for nothing (clients send `tool_calls: []` on plain turns).
    let asks = |v: &Option<Value>| match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    };
    if let Some((name, _)) = tool_fields.iter().find(|(_, v)| asks(v)) {
        return Err(RequestError::new(
            format!("{at}.{name}"),
            format!("{at}.{name} is not supported (no tool calling)"),
        ));
    }
    let role = match m.role.as_str() {
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "assistant",
        other => {
            return Err(RequestError::new(
                format!("{at}.role"),
                format!("{at}: unknown role {other:?} (system, user, assistant)"),
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
    Ok(ChatMessage::new(role, content))
}
