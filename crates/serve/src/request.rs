//! Request bodies of the endpoints, parsed and checked before anything runs: a field of the
//! wrong type, a number out of range, an unknown role, a content part that is not text, or a
//! field Tessera does not implement is a 400 naming the field, never a panic. The generation
//! fields and their checks are the runtime's request model (`tessera_runtime::request`), the
//! browser's too; this file adds the server's own bodies (the model's name, tokenize,
//! detokenize). Unknown fields are ignored, as the OpenAI API and llama-server do: parsed
//! straight from the body's bytes into typed views, an unknown field is skipped without being
//! built into a value, and a refused one is kept only as far as it could be a neutral value.

use serde::Deserialize;
use tessera_runtime::request::{self as model, RequestError};
pub use tessera_runtime::request::{Message, Options, Prompt};
use tessera_tokenizer::chat_template::ChatMessage;

use crate::error::ApiError;

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> ApiError {
        ApiError::invalid(e.message)
    }
}

/// Parses a JSON body into `T`, naming the offending field in the error.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = model::deserialize(&mut de)?;
    de.end()
        .map_err(|e| ApiError::invalid(format!("invalid request body: {e}")))?;
    Ok(value)
}

/// A generating endpoint's body: its own fields `T` and the generation [`Options`] (two
/// passes over the bytes, each skipping the other's fields, so that an error names the field,
/// which serde's `flatten` would hide, and nothing is built twice).
pub fn parse_with_options<T: serde::de::DeserializeOwned>(
    body: &[u8],
) -> Result<(T, Options), ApiError> {
    Ok((parse(body)?, parse(body)?))
}

/// The conversation as chat-template messages (the runtime's checks).
pub fn chat_messages(messages: &[Message]) -> Result<Vec<ChatMessage>, ApiError> {
    Ok(model::chat_messages(messages)?)
}

#[derive(Deserialize, Debug)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<Message>,
}

#[derive(Deserialize, Debug)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: Prompt,
}

#[derive(Deserialize, Debug)]
pub struct TokenizeRequest {
    pub model: Option<String>,
    pub content: String,
    #[serde(default)]
    pub add_special: bool,
    #[serde(default)]
    pub parse_special: bool,
    #[serde(default)]
    pub with_pieces: bool,
}

#[derive(Deserialize, Debug)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_400s_naming_the_field() {
        let (_, options): (CompletionRequest, Options) =
            parse_with_options(br#"{"prompt": "x", "temperature": -1}"#).unwrap();
        let bounds = tessera_runtime::request::Bounds {
            n_vocab: 1000,
            n_ctx: 512,
            default_seed: 0,
            default_max_tokens: None,
        };
        let e = ApiError::from(options.generate_params(&bounds).unwrap_err());
        assert_eq!(e.status, 400);
        assert!(e.message.contains("'temperature'"), "{}", e.message);
        let r: ChatRequest =
            parse(br#"{"messages": [{"role": "robot", "content": "x"}]}"#).unwrap();
        let e = chat_messages(&r.messages).unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("robot"), "{}", e.message);
    }

    #[test]
    fn wrong_types_are_400s() {
        for body in [
            r#"{"messages": "hi"}"#,
            r#"{"messages": [{"role": 1, "content": "x"}]}"#,
            r#"{"messages": [], "temperature": "hot"}"#,
            r#"{"messages": [], "max_tokens": 1e300}"#,
            "not json",
            "",
        ] {
            let e = parse_with_options::<ChatRequest>(body.as_bytes()).unwrap_err();
            assert_eq!(e.status, 400, "{body}");
        }
    }
}
