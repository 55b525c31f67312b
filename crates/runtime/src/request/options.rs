//! The generation options of a request, checked against the limits of [`super::fields`] and
//! turned into [`GenerateParams`] and speculative [`SpecParams`].

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use tessera_core::sampling::SamplingParams;

use super::asked::Asked;
use super::fields::{self, Bound, Field, Limit};
use super::structured::{self, ResponseFormat, Schema};
use super::tools::{TemplateKwargs, Tool, ToolChoice};
use super::RequestError;
use crate::chat_output::ReasoningFormat;
use crate::generation::GenerateParams;
use crate::speculative::{SpecParams, SpecType, SpeculativeOptions};

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged, expecting = "a string or an array of strings")]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Debug, Clone)]
#[serde(
    untagged,
    expecting = "an object of token ids and biases, or [token id, bias] pairs"
)]
pub enum LogitBias {
    /// OpenAI's `{"token id": bias}`.
    Map(HashMap<String, f64>),
    /// llama-server's `[[token id, bias], ...]`.
    Pairs(Vec<(u32, f64)>),
}

#[derive(Deserialize, Debug, Default, Clone)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// What the host's model and context bound a request by, and its defaults.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub n_vocab: usize,
    /// The context one generation has (the server's: one slot's).
    pub n_ctx: usize,
    /// The seed when the request gives none (or -1).
    pub default_seed: u64,
    /// The token limit when the request gives none.
    pub default_max_tokens: Option<usize>,
}

/// What every generating request accepts: streaming, limits, the sampling options (OpenAI's
/// names, llama-server's where OpenAI has none), speculative decoding, and the fields of the
/// OpenAI API Tessera does not implement yet. Unknown fields are ignored, as the OpenAI API and
/// llama-server do.
#[derive(Deserialize, Debug, Default, Clone)]
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
    /// Chat: the messages' control-token text becomes control tokens (see
    /// [`tokenize_chat_with`](crate::generate::tokenize_chat_with)).
    #[serde(default)]
    pub parse_special_in_content: bool,
    /// Draftless speculative decoding (the text stays the same).
    pub speculative: Option<SpeculativeOptions>,
    /// Structured output ([`structured`]): OpenAI's, and llama-server's two fields.
    pub response_format: Option<ResponseFormat>,
    pub json_schema: Option<Schema>,
    pub grammar: Option<String>,
    /// Tool calling and thinking ([`tools`](super::tools)), read by chat requests.
    pub tools: Option<Vec<Tool>>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub reasoning_format: Option<ReasoningFormat>,
    pub chat_template_kwargs: Option<TemplateKwargs>,
    pub enable_thinking: Option<bool>,
    pub reasoning_effort: Option<String>,
    // Not implemented: refused rather than ignored, so that a client never silently gets
    // something else than it asked for. Log-probabilities read `logprobs` and `top_logprobs`.
    pub n: Option<Asked>,
    pub functions: Option<Asked>,
    pub logprobs: Option<Asked>,
    pub top_logprobs: Option<Asked>,
    pub n_probs: Option<Asked>,
}

impl Options {
    /// Refuses the fields Tessera does not implement (a value that asks for nothing passes:
    /// `n: 1`, `logprobs: false`, empty `tools`).
    pub fn check_supported(&self) -> Result<(), RequestError> {
        let refused = [
            (&fields::N, &self.n),
            (&fields::FUNCTIONS, &self.functions),
            (&fields::LOGPROBS, &self.logprobs),
            (&fields::TOP_LOGPROBS, &self.top_logprobs),
            (&fields::N_PROBS, &self.n_probs),
        ];
        let asked = refused
            .iter()
            .find(|(f, v)| v.as_ref().is_some_and(|v| !v.is(&neutral(f))));
        match asked {
            Some((f, _)) => Err(RequestError::new(
                f.name,
                format!("'{}' is {}", f.name, f.limit),
            )),
            None => Ok(()),
        }
    }

    /// The generation these options ask for, checked against `bounds`.
    pub fn generate_params(&self, bounds: &Bounds) -> Result<GenerateParams, RequestError> {
        self.check_supported()?;
        let max_tokens = self
            .max_completion_tokens
            .or(self.max_tokens)
            .or(self.n_predict);
        let max_tokens = match integer(&fields::MAX_TOKENS, max_tokens, bounds)? {
            None => bounds.default_max_tokens,
            Some(-1) => None,
            Some(n) => Some(n as usize),
        };
        let d = SamplingParams::default();
        let seed = match integer(&fields::SEED, self.seed, bounds)? {
            None | Some(-1) => bounds.default_seed,
            Some(s) => s as u64,
        };
        let sampling = SamplingParams {
            temperature: number(&fields::TEMPERATURE, self.temperature, d.temperature)?,
            top_k: integer(&fields::TOP_K, self.top_k, bounds)?.map_or(d.top_k, |k| k as i32),
            top_p: number(&fields::TOP_P, self.top_p, d.top_p)?,
            min_p: number(&fields::MIN_P, self.min_p, d.min_p)?,
            repeat_penalty: number(
                &fields::REPEAT_PENALTY,
                self.repeat_penalty,
                d.repeat_penalty,
            )?,
            presence_penalty: number(
                &fields::PRESENCE_PENALTY,
                self.presence_penalty,
                d.presence_penalty,
            )?,
            frequency_penalty: number(
                &fields::FREQUENCY_PENALTY,
                self.frequency_penalty,
                d.frequency_penalty,
            )?,
            penalty_last_n: integer(&fields::REPEAT_LAST_N, self.repeat_last_n, bounds)?
                .map_or(d.penalty_last_n, |n| n as i32),
            seed,
            logit_bias: self.logit_bias(bounds.n_vocab)?,
        };
        // The table's limits are inside the sampler's; this only guards against them drifting.
        sampling
            .validate()
            .map_err(|e| RequestError::new("", e.to_string()))?;
        Ok(GenerateParams {
            max_tokens,
            sampling,
            stop: self.stops()?,
            ignore_eos: self.ignore_eos,
            grammar: structured::grammar(
                self.response_format.as_ref(),
                self.json_schema.as_ref(),
                self.grammar.as_deref(),
            )?,
        })
    }

    /// The request's speculative decoding: `None` for none; draft models are the host's to
    /// choose, so a request may only ask for the draftless types.
    pub fn spec_params(&self) -> Result<Option<SpecParams>, RequestError> {
        let Some(options) = &self.speculative else {
            return Ok(None);
        };
        let name = fields::SPECULATIVE.name;
        let params = options
            .to_params()
            .map_err(|e| RequestError::new(name, format!("'{name}': {e}")))?;
        match params.spec_type {
            SpecType::None => Ok(None),
            SpecType::Draft => Err(RequestError::new(
                name,
                format!("'{name}': a request cannot ask for a draft model (use ngram-simple, ngram-map-k, ngram-map-k4v or ngram-cache)"),
            )),
            _ => Ok(Some(params)),
        }
    }

    fn stops(&self) -> Result<Vec<String>, RequestError> {
        let stops = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        let f = &fields::STOP;
        let Limit::Strings { strings, bytes } = f.limit else {
            unreachable!("stop's limit is a string list")
        };
        let bad = stops
            .iter()
            .enumerate()
            .find(|(_, s)| s.is_empty() || s.len() > bytes);
        if let Some((i, s)) = bad {
            let at = match &self.stop {
                Some(Stop::Many(_)) => format!("stop[{i}]"),
                _ => "stop".to_string(),
            };
            return Err(RequestError::new(
                at.clone(),
                format!(
                    "'{at}' must be non-empty and at most {bytes} bytes, got {} bytes",
                    s.len()
                ),
            ));
        }
        if stops.len() > strings {
            return Err(out_of_range(f, &format!("{} strings", stops.len())));
        }
        Ok(stops)
    }

    fn logit_bias(&self, n_vocab: usize) -> Result<Vec<(u32, f32)>, RequestError> {
        let f = &fields::LOGIT_BIAS;
        let Limit::LogitBias { bias: most } = f.limit else {
            unreachable!("logit_bias's limit is a bias")
        };
        let pairs: Vec<(String, f64)> = match &self.logit_bias {
            None => return Ok(Vec::new()),
            Some(LogitBias::Map(m)) => m.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            Some(LogitBias::Pairs(p)) => p.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        };
        let name = f.name;
        let mut out = pairs
            .into_iter()
            .map(|(key, bias)| {
                let id = key
                    .parse::<u32>()
                    .ok()
                    .filter(|&id| (id as usize) < n_vocab)
                    .ok_or_else(|| {
                        RequestError::new(
                            name,
                            format!("'{name}': {key:?} is not a token id below {n_vocab}"),
                        )
                    })?;
                if !((-most..=most).contains(&bias) || bias == f64::NEG_INFINITY) {
                    return Err(RequestError::new(
                        name,
                        format!("'{name}' of token {id} must be between -{most} and {most} (or -Infinity), got {bias}"),
                    ));
                }
                Ok((id, bias as f32))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A map's order is arbitrary: the sampler sees the biases by token id.
        out.sort_by_key(|&(id, _)| id);
        Ok(out)
    }
}

/// The value of a refused field that asks for nothing, read from its [`FIELDS`](fields::FIELDS)
/// row (JSON text there, so the docs and the check cannot disagree).
fn neutral(f: &Field) -> Value {
    let Limit::Refused { neutral } = f.limit else {
        unreachable!("{} is not a refused field", f.name)
    };
    serde_json::from_str(neutral).expect("a refused field's neutral value is JSON")
}

fn out_of_range(f: &Field, got: &str) -> RequestError {
    RequestError::new(
        f.name,
        format!("'{}' must be {}, got {got}", f.name, f.limit),
    )
}

/// A number field's value, checked against its [`Limit::Number`].
fn number(f: &Field, v: Option<f64>, default: f32) -> Result<f32, RequestError> {
    let Limit::Number {
        min,
        max,
        min_excluded,
    } = f.limit
    else {
        unreachable!("{} is a number field", f.name)
    };
    match v {
        None => Ok(default),
        Some(x) if x <= max && (x > min || (x == min && !min_excluded)) => Ok(x as f32),
        Some(x) => Err(out_of_range(f, &x.to_string())),
    }
}

/// An integer field's value, checked against its [`Limit::Integer`] (-1 passes where it means
/// something).
fn integer(f: &Field, v: Option<i64>, bounds: &Bounds) -> Result<Option<i64>, RequestError> {
    let Limit::Integer {
        min,
        max,
        minus_one,
    } = f.limit
    else {
        unreachable!("{} is an integer field", f.name)
    };
    let max = match max {
        Bound::Value(v) => v,
        Bound::Vocab => bounds.n_vocab as i64,
        Bound::Context => bounds.n_ctx as i64,
        Bound::Unbounded => i64::MAX,
    };
    match v {
        None => Ok(None),
        Some(-1) if minus_one.is_some() => Ok(Some(-1)),
        Some(x) if (min..=max).contains(&x) => Ok(Some(x)),
        Some(x) => {
            let got = match f.limit {
                Limit::Integer {
                    max: bound @ (Bound::Vocab | Bound::Context),
                    ..
                } => format!("{x} ({bound} is {max})"),
                _ => x.to_string(),
            };
            Err(out_of_range(f, &got))
        }
    }
}
