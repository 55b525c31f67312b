//! Option objects as they come from JS (snake_case, like OpenAI's request fields), checked and
//! turned into the engine's parameters. Absent fields take llama.cpp's defaults.

use serde::Deserialize;
use tessera_core::sampling::SamplingParams;
use tessera_runtime::generate::GenerateParams;
use tessera_runtime::speculative::SpeculativeOptions;

use crate::errors::{ErrorCode, WasmError};

/// Options of `createEngine` that reach the engine.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LoadOptions {
    /// Positions the KV cache holds; 0 → the model's training context. Default 4096.
    pub context_size: Option<usize>,
    /// Largest micro-batch of prompt tokens. Default 512.
    pub batch_size: Option<usize>,
}

/// `stop` may be one string or a list, as in OpenAI's API.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum StopOption {
    One(String),
    Many(Vec<String>),
}

/// Per-request generation options.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct GenerateOptions {
    /// Default 256 (OpenAI has no limit but a context; a page should not spin forever).
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub seed: Option<u64>,
    pub stop: Option<StopOption>,
    /// Never end at an end-of-generation token (benchmarks, fixture comparisons).
    pub ignore_eos: bool,
    /// Draftless speculative decoding (same output, fewer model passes on repetitive text).
    pub speculative: Option<SpeculativeOptions>,
}

pub const DEFAULT_MAX_TOKENS: usize = 256;

impl GenerateOptions {
    pub fn to_params(&self) -> Result<GenerateParams, WasmError> {
        let d = SamplingParams::default();
        let sampling = SamplingParams {
            temperature: self.temperature.unwrap_or(d.temperature),
            top_k: self.top_k.unwrap_or(d.top_k),
            top_p: self.top_p.unwrap_or(d.top_p),
            min_p: self.min_p.unwrap_or(d.min_p),
            repeat_penalty: self.repeat_penalty.unwrap_or(d.repeat_penalty),
            presence_penalty: self.presence_penalty.unwrap_or(d.presence_penalty),
            frequency_penalty: self.frequency_penalty.unwrap_or(d.frequency_penalty),
            seed: self.seed.unwrap_or(d.seed),
            ..d
        };
        sampling.validate()?;
        let stop = match &self.stop {
            None => Vec::new(),
            Some(StopOption::One(s)) => vec![s.clone()],
            Some(StopOption::Many(v)) => v.clone(),
        };
        if stop.len() > 16 {
            return Err(WasmError::new(
                ErrorCode::InvalidArgument,
                format!("stop: at most 16 strings, got {}", stop.len()),
            ));
        }
        Ok(GenerateParams {
            max_tokens: Some(self.max_tokens.map_or(DEFAULT_MAX_TOKENS, |m| m as usize)),
            sampling,
            stop,
            ignore_eos: self.ignore_eos,
        })
    }
}
