//! Request bodies of the OpenAI endpoints, parsed and checked before anything runs: a field of
//! the wrong type, a number out of range, an unknown role, a content part that is not text, or
//! a field Tessera does not implement is a 400 naming the field, never a panic. Unknown fields
//! are ignored, as the OpenAI API and llama-server do.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use tessera_core::sampling::SamplingParams;
use tessera_runtime::generate::GenerateParams;
use tessera_runtime::speculative::{SpecParams, SpecType, SpeculativeOptions};
use tessera_tokenizer::chat_template::ChatMessage;

use crate::error::ApiError;

/// Most stop strings, and bytes in one (bounds the stop matcher's work per token).
const MAX_STOPS: usize = 16;
const MAX_STOP_BYTES: usize = 256;

/// Parses a JSON body into `T`, naming the offending field in the error.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    from_value(&json_value(body)?)
}

/// A generating endpoint's body: its own fields `T` and the generation [`Options`] (two views
/// of one JSON object, so that an error names the field, which serde's `flatten` would hide).
pub fn parse_with_options<T: serde::de::DeserializeOwned>(
    body: &[u8],
) -> Result<(T, Options), ApiError> {
    let v = json_value(body)?;
    Ok((from_value(&v)?, from_value(&v)?))
}

fn json_value(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("invalid request body: {e}")))
}

fn from_value<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match path.as_str() {
            "." | "" => ApiError::invalid(format!("invalid request body: {inner}")),
            _ => ApiError::invalid(format!("invalid request body: '{path}': {inner}")),
        }
    })
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
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
}

#[derive(Deserialize, Debug)]
pub struct Message {
    pub role: String,
    /// `null` or absent for an assistant turn that only called tools (refused anyway).
    pub content: Option<Content>,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize, Debug)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
pub enum LogitBias {
    /// OpenAI's `{"token id": bias}`.
    Map(HashMap<String, f64>),
    /// llama-server's `[[token id, bias], ...]`.
    Pairs(Vec<(u32, f64)>),
}

#[derive(Deserialize, Debug, Default)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// What every generating endpoint accepts: streaming, limits and the sampling options of the JS
/// API (with llama-server's names where OpenAI has none).
#[derive(Deserialize, Debug, Default)]
pub struct Options {
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<i64>,
    pub max_completion_tokens: Option<i64>,
    pub n_predict: Option<i64>,
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    pub min_p: Option<f64>,
    pub repeat_penalty: Option<f64>,
    pub repeat_last_n: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub stop: Option<Stop>,
    pub logit_bias: Option<LogitBias>,
    #[serde(default)]
    pub ignore_eos: bool,
    /// Draftless speculative decoding, as the JS API takes it (the text stays the same).
    pub speculative: Option<SpeculativeOptions>,
    // Fields of the OpenAI API that Tessera does not implement: refused rather than ignored,
    // so that a client never silently gets something else than it asked for.
    pub n: Option<Value>,
    pub tools: Option<Value>,
    pub tool_choice: Option<Value>,
    pub functions: Option<Value>,
    pub response_format: Option<Value>,
    pub logprobs: Option<Value>,
    pub top_logprobs: Option<Value>,
}

impl Options {
    /// Refuses the fields Tessera does not implement (a value that asks for nothing passes:
    /// `n: 1`, `logprobs: false`, `response_format: {"type": "text"}`, empty `tools`).
    pub fn check_supported(&self) -> Result<(), ApiError> {
        let asks = |v: &Option<Value>, nothing: &[Value]| {
            v.as_ref()
                .is_some_and(|v| !v.is_null() && !nothing.contains(v))
        };
        let text_format = serde_json::json!({"type": "text"});
        let unsupported = [
            ("n", asks(&self.n, &[Value::from(1)])),
            ("tools", asks(&self.tools, &[Value::Array(vec![])])),
            (
                "tool_choice",
                asks(&self.tool_choice, &[Value::from("none")]),
            ),
            ("functions", asks(&self.functions, &[Value::Array(vec![])])),
            (
                "response_format",
                asks(&self.response_format, &[text_format]),
            ),
            ("logprobs", asks(&self.logprobs, &[Value::from(false)])),
            ("top_logprobs", asks(&self.top_logprobs, &[Value::from(0)])),
        ];
        match unsupported.iter().find(|(_, asked)| *asked) {
            Some((field, _)) => Err(ApiError::invalid(format!(
                "'{field}' is not supported by this server"
            ))),
            None => Ok(()),
        }
    }

    /// The generation these options ask for, checked against the model's vocabulary and the
    /// slot's context. `default_seed` is used when the request gives none (or -1).
    pub fn generate_params(
        &self,
        n_vocab: usize,
        n_ctx: usize,
        default_seed: u64,
    ) -> Result<GenerateParams, ApiError> {
        self.check_supported()?;
        let max_tokens = match self
            .max_completion_tokens
            .or(self.max_tokens)
            .or(self.n_predict)
        {
            None | Some(-1) => None,
            Some(n) if n >= 1 && n as u64 <= n_ctx as u64 => Some(n as usize),
            Some(n) => {
                return Err(ApiError::invalid(format!(
                    "'max_tokens' must be between 1 and the context size {n_ctx} (or -1), got {n}"
                )))
            }
        };
        let d = SamplingParams::default();
        let sampling = SamplingParams {
            temperature: ranged("temperature", self.temperature, 0.0, 100.0, d.temperature)?,
            top_k: int_ranged("top_k", self.top_k, 0, n_vocab as i64, d.top_k as i64)? as i32,
            top_p: ranged("top_p", self.top_p, 0.0, 1.0, d.top_p)?,
            min_p: ranged("min_p", self.min_p, 0.0, 1.0, d.min_p)?,
            repeat_penalty: ranged(
                "repeat_penalty",
                self.repeat_penalty,
                0.0,
                10.0,
                d.repeat_penalty,
            )?,
            presence_penalty: ranged(
                "presence_penalty",
                self.presence_penalty,
                -2.0,
                2.0,
                d.presence_penalty,
            )?,
            frequency_penalty: ranged(
                "frequency_penalty",
                self.frequency_penalty,
                -2.0,
                2.0,
                d.frequency_penalty,
            )?,
            penalty_last_n: int_ranged(
                "repeat_last_n",
                self.repeat_last_n,
                -1,
                n_ctx as i64,
                d.penalty_last_n as i64,
            )? as i32,
            seed: match self.seed {
                None | Some(-1) => default_seed,
                Some(s) if s >= 0 => s as u64,
                Some(s) => {
                    return Err(ApiError::invalid(format!(
                        "'seed' must be ≥ 0 or -1, got {s}"
                    )))
                }
            },
            logit_bias: self.logit_bias(n_vocab)?,
        };
        sampling
            .validate()
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        Ok(GenerateParams {
            max_tokens,
            sampling,
            stop: self.stops()?,
            ignore_eos: self.ignore_eos,
        })
    }

    /// The request's speculative decoding: `None` for none; draft models are the server
    /// operator's to choose, so a request may only ask for the draftless types.
    pub fn spec_params(&self) -> Result<Option<SpecParams>, ApiError> {
        let Some(options) = &self.speculative else {
            return Ok(None);
        };
        let params = options
            .to_params()
            .map_err(|e| ApiError::invalid(format!("'speculative': {e}")))?;
        match params.spec_type {
            SpecType::None => Ok(None),
            SpecType::Draft => Err(ApiError::invalid(
                "'speculative': a request cannot ask for a draft model (use ngram-simple, \
                 ngram-map-k, ngram-map-k4v or ngram-cache)",
            )),
            _ => Ok(Some(params)),
        }
    }

    fn stops(&self) -> Result<Vec<String>, ApiError> {
        let stops = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        if stops.len() > MAX_STOPS
            || stops
                .iter()
                .any(|s| s.is_empty() || s.len() > MAX_STOP_BYTES)
        {
            return Err(ApiError::invalid(format!(
                "'stop' takes at most {MAX_STOPS} non-empty strings of up to {MAX_STOP_BYTES} bytes"
            )));
        }
        Ok(stops)
    }

    fn logit_bias(&self, n_vocab: usize) -> Result<Vec<(u32, f32)>, ApiError> {
        let pairs: Vec<(String, f64)> = match &self.logit_bias {
            None => return Ok(Vec::new()),
            Some(LogitBias::Map(m)) => m.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            Some(LogitBias::Pairs(p)) => p.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        };
        pairs
            .into_iter()
            .map(|(key, bias)| {
                let id = key
                    .parse::<u32>()
                    .ok()
                    .filter(|&id| (id as usize) < n_vocab)
                    .ok_or_else(|| {
                        ApiError::invalid(format!(
                            "'logit_bias': {key:?} is not a token id below {n_vocab}"
                        ))
                    })?;
                if !(-100.0..=100.0).contains(&bias) {
                    return Err(ApiError::invalid(format!(
                        "'logit_bias' of token {id} must be between -100 and 100, got {bias}"
                    )));
                }
                Ok((id, bias as f32))
            })
            .collect()
    }
}

fn ranged(field: &str, v: Option<f64>, lo: f64, hi: f64, default: f32) -> Result<f32, ApiError> {
    match v {
        None => Ok(default),
        Some(x) if (lo..=hi).contains(&x) => Ok(x as f32),
        Some(x) => Err(ApiError::invalid(format!(
            "'{field}' must be between {lo} and {hi}, got {x}"
        ))),
    }
}

fn int_ranged(
    field: &str,
    v: Option<i64>,
    lo: i64,
    hi: i64,
    default: i64,
) -> Result<i64, ApiError> {
    match v {
        None => Ok(default),
        Some(x) if (lo..=hi).contains(&x) => Ok(x),
        Some(x) => Err(ApiError::invalid(format!(
            "'{field}' must be between {lo} and {hi}, got {x}"
        ))),
    }
}

/// The conversation as chat-template messages: roles system (or OpenAI's newer `developer`),
/// user and assistant; content a string or text parts, joined.
pub fn chat_messages(messages: &[Message]) -> Result<Vec<ChatMessage>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid("'messages' is empty"));
    }
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let role = match m.role.as_str() {
                "system" | "developer" => "system",
                "user" => "user",
                "assistant" => "assistant",
                other => {
                    return Err(ApiError::invalid(format!(
                        "messages[{i}]: unknown role {other:?} (system, user, assistant)"
                    )))
                }
            };
            let content = match &m.content {
                None => String::new(),
                Some(Content::Text(t)) => t.clone(),
                Some(Content::Parts(parts)) => {
                    let mut text = String::new();
                    for (j, p) in parts.iter().enumerate() {
                        match (p.kind.as_str(), &p.text) {
                            ("text", Some(t)) => text.push_str(t),
                            (kind, _) => {
                                return Err(ApiError::invalid(format!(
                                    "messages[{i}].content[{j}]: a {kind:?} part is not supported (only text)"
                                )))
                            }
                        }
                    }
                    text
                }
            };
            Ok(ChatMessage::new(role, content))
        })
        .collect()
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

    fn options(json: &str) -> Options {
        parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn ranges_are_checked_and_named() {
        for (json, field) in [
            (r#"{"temperature": -1}"#, "temperature"),
            (r#"{"top_p": 1.5}"#, "top_p"),
            (r#"{"top_k": 1000000}"#, "top_k"),
            (r#"{"max_tokens": 100000}"#, "max_tokens"),
            (r#"{"max_tokens": 0}"#, "max_tokens"),
            (r#"{"logit_bias": {"99999999": 1}}"#, "logit_bias"),
            (r#"{"logit_bias": {"5": 1000}}"#, "logit_bias"),
            (r#"{"repeat_last_n": -5}"#, "repeat_last_n"),
            (r#"{"n": 2}"#, "'n'"),
            (r#"{"tools": [{"type": "function"}]}"#, "tools"),
            (
                r#"{"response_format": {"type": "json_object"}}"#,
                "response_format",
            ),
        ] {
            let e = options(json).generate_params(1000, 512, 0).unwrap_err();
            assert_eq!(e.status, 400, "{json}");
            assert!(e.message.contains(field), "{json}: {}", e.message);
        }
    }

    #[test]
    fn options_become_generate_params() {
        let p = options(
            r#"{"temperature": 0, "max_tokens": 7, "stop": "\n", "seed": 3,
                "logit_bias": {"5": -100}, "repeat_last_n": 32, "n": 1, "logprobs": false}"#,
        )
        .generate_params(1000, 512, 9)
        .unwrap();
        assert_eq!(p.max_tokens, Some(7));
        assert_eq!(p.stop, vec!["\n".to_string()]);
        assert_eq!(p.sampling.seed, 3);
        assert_eq!(p.sampling.temperature, 0.0);
        assert_eq!(p.sampling.logit_bias, vec![(5, -100.0)]);
        assert_eq!(p.sampling.penalty_last_n, 32);
        let p = options("{}").generate_params(1000, 512, 9).unwrap();
        assert_eq!((p.max_tokens, p.sampling.seed), (None, 9));
    }

    #[test]
    fn content_parts_are_joined_and_other_parts_refused() {
        let (r, _): (ChatRequest, _) = parse_with_options(
            br#"{"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}"#,
        )
        .unwrap();
        let m = chat_messages(&r.messages).unwrap();
        assert_eq!(
            (m[0].role.as_str(), m[0].content.as_str()),
            ("system", "ab")
        );
        let r: ChatRequest = parse(
            br#"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}"#,
        )
        .unwrap();
        assert!(chat_messages(&r.messages)
            .unwrap_err()
            .message
            .contains("image_url"));
        let r: ChatRequest = parse(br#"{"messages": [{"role": "tool", "content": "x"}]}"#).unwrap();
        assert!(chat_messages(&r.messages)
            .unwrap_err()
            .message
            .contains("tool"));
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
