//! The OpenAI-shaped request every host takes (`tessera serve`'s endpoints and the browser's
//! `create()`), parsed and checked here once so that both accept and refuse the same requests
//! with the same messages: the chat [`messages`], the generation [`Options`] (sampling, stop,
//! logit bias, limits, speculative decoding), [`structured`] output, [`tools`] and thinking
//! ([`prepare_chat`]), and the fields Tessera does not implement yet (`n`, `logprobs`: refused
//! unless they ask for nothing). [`fields`] is the table of every field's limits that the
//! checks read and the docs show.
//!
//! A host deserializes with [`deserialize`] (from JSON, or from a JS value) so that a type
//! error names its field; every failure is a [`RequestError`]. Embeddings' `input` is parsed
//! here too once the engine computes embeddings.

mod asked;
pub mod fields;
pub mod messages;
mod options;
pub mod structured;
pub mod tools;

pub use asked::Asked;
pub use fields::{Field, FIELDS};
pub use messages::{chat_messages, Content, FunctionCallIn, Message, Part, Prompt, ToolCallIn};
pub use options::{Bounds, LogitBias, Options, Stop, StreamOptions};
pub use tools::{prepare_chat, PrepareError, PreparedChat, Tool, ToolChoice};

/// A request Tessera refuses: the field at fault (a path such as `messages[0].content`, empty
/// when the body as a whole is malformed) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub field: String,
    pub message: String,
}

impl RequestError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> RequestError {
        RequestError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Deserializes `T` from any serde source (a JSON value, a JS value), naming the field of a
/// wrong type or shape in the error.
pub fn deserialize<'de, T, D>(deserializer: D) -> Result<T, RequestError>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    deserialize_field("", deserializer)
}

/// [`deserialize`] for the value of the request's field `field` (e.g. `messages` where a host
/// receives them alone), whose name then leads the error's path.
pub fn deserialize_field<'de, T, D>(field: &str, deserializer: D) -> Result<T, RequestError>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let inner = e.path().to_string();
        let path = match inner.as_str() {
            "." | "" => field.to_string(),
            p if field.is_empty() || p.starts_with('[') => format!("{field}{p}"),
            p => format!("{field}.{p}"),
        };
        let message = match path.as_str() {
            "" => format!("invalid request: {}", e.into_inner()),
            _ => format!("invalid request: '{path}': {}", e.into_inner()),
        };
        RequestError::new(path, message)
    })
}

#[cfg(test)]
mod tests;
