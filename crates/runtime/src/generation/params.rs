//! What a generation is asked for ([`GenerateParams`]), how it ends ([`StopReason`],
//! [`GenerateStats`], [`GenerateError`]), the host's [`Clock`], and the sampler a generation
//! starts with.
//!
//! The engine has no clock of its own (wasm has none it could rely on), so timings come from a
//! [`Clock`] the host supplies.

use tessera_core::error::EngineError;
use tessera_core::sampling::{Sampler, SamplingError, SamplingParams};
use tessera_tokenizer::chat_template::ChatTemplateError;
use tessera_tokenizer::Tokenizer;

use crate::constraint::{ConstraintError, Grammar};
use crate::speculative::SpecError;

/// Seconds since some fixed point, from the host.
pub trait Clock {
    fn now_s(&self) -> f64;
}

/// For hosts without a clock: every timing reads 0.
pub struct NoClock;

impl Clock for NoClock {
    fn now_s(&self) -> f64 {
        0.0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error("chat template: {0}")]
    ChatTemplate(#[from] ChatTemplateError),
    #[error("the model has no chat template")]
    NoChatTemplate,
    /// Message `message`'s content spells a control token and the chat template does not
    /// write the contents as they are, so its text cannot be told from the template's markers.
    #[error("messages[{message}] contains the text of a control token, and the chat template changes the messages' text, so it cannot be kept apart from the template's own control tokens: remove it, or set parse_special_in_content to parse it as control tokens")]
    ControlTextInContent { message: usize },
    /// The tool definitions spell a control token (they are written into the prompt as text).
    #[error("'tools' contains the text of a control token: remove it, or set parse_special_in_content to parse it as control tokens")]
    ControlTextInTools,
    #[error("the prompt is empty (no tokens)")]
    EmptyPrompt,
    #[error("the prompt has {n_prompt} tokens but the context holds {n_ctx}: use a larger context (-c) or a shorter prompt")]
    PromptTooLong { n_prompt: usize, n_ctx: usize },
    /// The grammar cannot be compiled (a schema keyword not supported, a syntax error) or
    /// followed (its engine failed mid-way).
    #[error("grammar: {0}")]
    Grammar(#[from] ConstraintError),
    /// The speculator failed (its engine and sampling errors are [`GenerateError::Engine`]
    /// and [`GenerateError::Sampling`]).
    #[error(transparent)]
    Speculative(SpecError),
}

impl From<SpecError> for GenerateError {
    fn from(e: SpecError) -> Self {
        match e {
            SpecError::Engine(e) => GenerateError::Engine(e),
            SpecError::Sampling(e) => GenerateError::Sampling(e),
            other => GenerateError::Speculative(other),
        }
    }
}

#[derive(Clone, Debug)]
pub struct GenerateParams {
    /// Most tokens to generate; `None` → until end of generation or a full context.
    pub max_tokens: Option<usize>,
    pub sampling: SamplingParams,
    /// Generation ends before any of these strings; they are not part of the output.
    pub stop: Vec<String>,
    /// Never end at an end-of-generation token: like llama.cpp, such tokens are never sampled.
    pub ignore_eos: bool,
    /// What the answer must follow (JSON schema, regular expression, Lark grammar): only the
    /// tokens the grammar allows are sampled, and the generation ends where it is complete.
    pub grammar: Option<Grammar>,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            max_tokens: Some(128),
            sampling: SamplingParams::default(),
            stop: Vec::new(),
            ignore_eos: false,
            grammar: None,
        }
    }
}

/// Why a generation ended (text generation and the speculative token loop alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced this end-of-generation token (not part of the text).
    EndOfGeneration(u32),
    /// The stop string with this index in [`GenerateParams::stop`] appeared.
    StopString(usize),
    /// The token limit was reached.
    MaxTokens,
    /// No room for the next token in the context.
    ContextFull,
    /// The host asked to stop (a callback's `false`, an abort).
    Cancelled,
    /// The grammar is complete: nothing may follow.
    GrammarComplete,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GenerateStats {
    /// Prompt tokens decoded by this call (fewer than the prompt when a cached prefix was reused).
    pub n_prompt_eval: usize,
    pub n_prompt: usize,
    /// Tokens sampled (an end-of-generation token included).
    pub n_generated: usize,
    pub prompt_s: f64,
    pub generate_s: f64,
    pub stop: StopReason,
    pub tokens: Vec<u32>,
}

impl GenerateStats {
    pub fn prompt_tokens_per_s(&self) -> f64 {
        per_second(self.n_prompt_eval, self.prompt_s)
    }
    /// Decode speed; the first generated token comes from the prompt's logits, so the steps
    /// timed are `n_generated - 1` decodes (at most).
    pub fn generate_tokens_per_s(&self) -> f64 {
        per_second(self.n_generated.saturating_sub(1), self.generate_s)
    }
}

/// The sampler for a generation after `prompt`: `params.sampling`, with the end-of-generation
/// tokens banned when `ignore_eos` is set, primed with the prompt (for the penalties).
pub fn prompt_sampler(
    params: &GenerateParams,
    tokenizer: &Tokenizer,
    prompt: &[u32],
) -> Result<Sampler, SamplingError> {
    let mut sampling = params.sampling.clone();
    if params.ignore_eos {
        sampling.logit_bias.extend(
            tokenizer
                .eog_ids()
                .iter()
                .map(|&id| (id, f32::NEG_INFINITY)),
        );
    }
    let mut sampler = Sampler::new(sampling)?;
    for &t in prompt {
        sampler.accept(t);
    }
    Ok(sampler)
}

fn per_second(n: usize, s: f64) -> f64 {
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}
