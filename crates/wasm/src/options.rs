//! Option objects as they come from JS (snake_case, like OpenAI's request fields), checked and
//! turned into the engine's parameters. A request's generation options are the runtime's
//! request model (`tessera_runtime::request`, the server's too): the same limits and messages.
//! Absent fields take llama.cpp's defaults.

use serde::Deserialize;
use tessera_runtime::generate::GenerateParams;
use tessera_runtime::request::{Bounds, Options};
use tessera_runtime::speculative::SpecParams;

use crate::errors::WasmError;

/// Options of `createEngine` that reach the engine.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LoadOptions {
    /// Positions the KV cache holds; 0 → the model's training context. Default 4096.
    pub context_size: Option<usize>,
    /// Largest micro-batch of prompt tokens. Default 512.
    pub batch_size: Option<usize>,
}

/// `max_tokens` when a request gives none (OpenAI has no limit but a context; a page should
/// not spin forever).
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// A request's generation and speculative parameters, checked against the model's vocabulary
/// and the context. The page draws a seed when the request has none.
pub fn generation_params(
    options: &Options,
    n_vocab: usize,
    n_ctx: usize,
) -> Result<(GenerateParams, Option<SpecParams>), WasmError> {
    let bounds = Bounds {
        n_vocab,
        n_ctx,
        default_seed: 0,
        default_max_tokens: Some(DEFAULT_MAX_TOKENS),
    };
    Ok((options.generate_params(&bounds)?, options.spec_params()?))
}
