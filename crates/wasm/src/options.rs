//! Option objects as they come from JS (snake_case, like OpenAI's request fields), checked and
//! turned into the engine's parameters. Absent fields take llama.cpp's defaults.

use serde::Deserialize;
use tessera_core::sampling::SamplingParams;
use tessera_runtime::generate::GenerateParams;
pub use tessera_runtime::speculative::SpeculativeOptions;

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
    /// Window of the penalties in tokens (llama.cpp's `repeat_last_n`): 0 → off, -1 → the
    /// whole context. Default 64.
    pub repeat_last_n: Option<i32>,
    /// `(token id, bias)` pairs added to the logits before sampling (-inf bans a token). The
    /// JS side turns OpenAI's `{ "id": bias }` object into these pairs.
    pub logit_bias: Option<Vec<(u32, f32)>>,
    pub stop: Option<StopOption>,
    /// Never end at an end-of-generation token (benchmarks, fixture comparisons).
    pub ignore_eos: bool,
    /// Draftless speculative decoding (same output, fewer model passes on repetitive text).
    pub speculative: Option<SpeculativeOptions>,
}

pub const DEFAULT_MAX_TOKENS: usize = 256;

impl GenerateOptions {
    /// A logit bias for a token the model does not have is a caller's mistake, not a no-op.
    pub fn check_tokens(&self, n_vocab: usize) -> Result<(), WasmError> {
        let bad = self
            .logit_bias
            .iter()
            .flatten()
            .find(|(id, _)| *id as usize >= n_vocab);
        match bad {
            Some((id, _)) => Err(WasmError::new(
                ErrorCode::InvalidArgument,
                format!("logit_bias: token {id} is not in the vocabulary ({n_vocab} tokens)"),
            )),
            None => Ok(()),
        }
    }

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
            penalty_last_n: self.repeat_last_n.unwrap_or(d.penalty_last_n),
            logit_bias: self.logit_bias.clone().unwrap_or_default(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logit_bias_and_repeat_last_n_reach_the_sampler() {
        let o = GenerateOptions {
            logit_bias: Some(vec![(5, 2.5), (7, f32::NEG_INFINITY)]),
            repeat_last_n: Some(-1),
            ..Default::default()
        };
        let p = o.to_params().unwrap();
        assert_eq!(
            p.sampling.logit_bias,
            vec![(5, 2.5), (7, f32::NEG_INFINITY)]
        );
        assert_eq!(p.sampling.penalty_last_n, -1);
        assert!(o.check_tokens(8).is_ok());
        assert_eq!(
            o.check_tokens(7).unwrap_err().code,
            ErrorCode::InvalidArgument
        );
        let bad = GenerateOptions {
            repeat_last_n: Some(-2),
            ..Default::default()
        };
        assert_eq!(
            bad.to_params().unwrap_err().code,
            ErrorCode::InvalidArgument
        );
    }
}
