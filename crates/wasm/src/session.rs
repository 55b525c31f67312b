//! A loaded model with its context and the generation in progress, advanced one step per call.
//!
//! In the browser the worker must get back to its event loop between tokens (to post each
//! token to the page and to hear an abort), so the session drives the runtime's
//! [`Generation`] state machine one step at a time: [`Session::begin`] starts it,
//! each [`Session::step`] decodes a slice of the prompt or produces one token's text (several
//! after a verified speculative draft), and [`Session::cancel`] ends it early. Outputs and
//! the KV cache left behind are those of `tessera_runtime::generate::generate`
//! (tests/suite/session.rs compares them).
//!
//! On a backend whose results come back asynchronously (WebGPU in a browser) a step may end
//! with [`Step::pending`]: the step's work was submitted and nothing else changed; the caller
//! awaits the backend's read-back and calls [`Session::step`] again, which then completes it.

use std::sync::Arc;
use std::task::Poll;

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::Backend;
use tessera_core::{Context, ContextParams, Model, ThreadPool};
use tessera_runtime::generate::{Clock, GenerateError, GenerateParams, GenerateStats};
use tessera_runtime::generation::{
    check_sequence, Generation, GenerationOptions, SpecReport, Step as GenerationStep, PREFILL_STEP,
};
use tessera_runtime::request::{prepare_chat, Options, PrepareError, PreparedChat};
use tessera_runtime::speculative::{SpecParams, SpecType, SpeculatorChain};
use tessera_tokenizer::chat_template::{ChatMessage, ChatTemplate};

use crate::errors::{ErrorCode, WasmError};
use crate::options::LoadOptions;

pub struct Session {
    model: Arc<Model>,
    ctx: Context,
    template: Option<ChatTemplate>,
    active: Option<Generation>,
    /// The backend samples on the device (`Backend::compute_greedy`, `compute_sampled`): a
    /// step reads back one token id instead of the logits.
    device_sampling: bool,
    /// The backend reads results back asynchronously (no speculative decoding there yet).
    async_backend: bool,
}

/// What one step produced, in the shape the JS surface posts.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Text safe to show now (may be empty).
    pub text: String,
    /// Set on the step that ends the generation.
    pub finished: Option<GenerateStats>,
    /// The step's work was submitted to an asynchronous backend and nothing else happened:
    /// await the backend's read-back, then call `step` again.
    pub pending: bool,
    /// Set with `finished` when the generation was speculative.
    pub speculative: Option<SpecReport>,
}

impl From<GenerationStep> for Step {
    fn from(step: GenerationStep) -> Step {
        let quiet = Step {
            text: String::new(),
            finished: None,
            pending: false,
            speculative: None,
        };
        match step {
            GenerationStep::Pending => Step {
                pending: true,
                ..quiet
            },
            GenerationStep::Prefilled { .. } => quiet,
            GenerationStep::Tokens { text, .. } => Step { text, ..quiet },
            GenerationStep::Done {
                text,
                stats,
                speculative,
            } => Step {
                text,
                finished: Some(stats),
                speculative,
                ..quiet
            },
        }
    }
}

impl Session {
    pub fn new(
        model: Arc<Model>,
        options: &LoadOptions,
        threads: Arc<dyn ThreadPool>,
    ) -> Result<Session, WasmError> {
        let backend = Box::new(CpuBackend::new(threads));
        let ctx = Context::new(model.clone(), context_params(options), backend)?;
        Ok(Session::with_context(model, ctx, false, false))
    }

    /// A session on another backend than the CPU (the browser's WebGPU backend, in
    /// asynchronous read-back mode). `device_sampling`: the backend samples on the device, so
    /// a step reads back a token id only.
    pub fn with_backend(
        model: Arc<Model>,
        options: &LoadOptions,
        backend: Box<dyn Backend>,
        device_sampling: bool,
    ) -> Result<Session, WasmError> {
        let ctx = Context::new(model.clone(), context_params(options), backend)?;
        Ok(Session::with_context(model, ctx, device_sampling, true))
    }

    fn with_context(
        model: Arc<Model>,
        ctx: Context,
        device_sampling: bool,
        async_backend: bool,
    ) -> Session {
        // A template that does not parse makes chat unavailable, not the model.
        let template = model.chat_template().ok().flatten();
        Session {
            model,
            ctx,
            template,
            active: None,
            device_sampling,
            async_backend,
        }
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    pub fn n_ctx(&self) -> usize {
        self.ctx.n_ctx()
    }

    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    pub fn is_generating(&self) -> bool {
        self.active.is_some()
    }

    /// Renders and tokenizes a conversation with the model's chat template for a request's
    /// `options` (its tools, thinking switches, `parse_special_in_content`): the prompt, and the
    /// grammar and reading of its answer (see `tessera_runtime::request::prepare_chat`).
    pub fn chat_prompt(
        &self,
        messages: Vec<ChatMessage>,
        options: &Options,
    ) -> Result<PreparedChat, WasmError> {
        let template = self
            .template
            .as_ref()
            .ok_or_else(|| WasmError::from(GenerateError::NoChatTemplate))?;
        prepare_chat(options, self.model.tokenizer(), template, messages).map_err(|e| match e {
            PrepareError::Request(e) => e.into(),
            PrepareError::Generate(e) => e.into(),
        })
    }

    /// Starts generating after `prompt` (replacing a generation in progress). The longest
    /// prefix the KV cache shares with `prompt` is reused, as `generate` does.
    pub fn begin(
        &mut self,
        prompt: Vec<u32>,
        params: GenerateParams,
        clock: &dyn Clock,
    ) -> Result<(), WasmError> {
        self.begin_with(prompt, params, None, clock)
    }

    /// [`Session::begin`], speculatively with a draftless type when `spec` asks for one (the
    /// output stays that of plain decoding). Draft models and ngram-cache files are the native
    /// host's; the CPU backend only.
    pub fn begin_with(
        &mut self,
        prompt: Vec<u32>,
        params: GenerateParams,
        spec: Option<SpecParams>,
        clock: &dyn Clock,
    ) -> Result<(), WasmError> {
        self.active = None;
        let speculator = match spec {
            Some(p) if p.spec_type != SpecType::None => {
                if p.spec_type == SpecType::Draft {
                    return Err(WasmError::new(
                        ErrorCode::InvalidArgument,
                        "speculative.type: draft models are not supported in the browser; \
                         use ngram-simple, ngram-map-k, ngram-map-k4v or ngram-cache",
                    ));
                }
                if self.async_backend {
                    return Err(WasmError::new(
                        ErrorCode::InvalidArgument,
                        "speculative decoding runs on the wasm (CPU) backend only",
                    ));
                }
                Some(SpeculatorChain::from_params(&p, None, None, None)?)
            }
            _ => None,
        };
        let options = GenerationOptions {
            device_sampling: self.device_sampling,
            prefill_step: PREFILL_STEP,
            speculator,
            // A page's context ends its answers (llama.cpp's default).
            context_shift: None,
        };
        let generation = Generation::start(&mut self.ctx, prompt, params, options, clock)?;
        self.active = Some(generation);
        Ok(())
    }

    /// Forced decoding, one slice per call: `ids` is fed as one sequence from an empty KV
    /// cache, and the call decodes `ids[from..]` up to one slice, returning the model's top-1
    /// next token after each of those positions (on a GPU backend only these ids leave the
    /// device). Call with `from = 0` first (it ends any generation and clears the cache), then
    /// with `from` advanced by the ids returned. `None`: the slice was submitted to an
    /// asynchronous backend; await its read-back and repeat the same call.
    pub fn predict_chunk(
        &mut self,
        ids: &[u32],
        from: usize,
    ) -> Result<Option<Vec<u32>>, WasmError> {
        check_sequence(&self.ctx, ids)?;
        if from == 0 {
            self.active = None;
            self.ctx.clear();
        }
        if from >= ids.len() || self.ctx.tokens() != &ids[..from] {
            return Err(WasmError::new(
                ErrorCode::InvalidState,
                format!(
                    "forced decoding: position {from} does not continue the {} positions decoded",
                    self.ctx.n_past()
                ),
            ));
        }
        // One micro-batch per call at most: a pending call must commit nothing.
        let to = (from + PREFILL_STEP.min(self.ctx.n_batch())).min(ids.len());
        Ok(match self.ctx.poll_decode_greedy(&ids[from..to], true)? {
            Poll::Ready(next) => Some(next),
            Poll::Pending => None,
        })
    }

    /// Advances the generation by one slice of prompt or one token. An error ends it.
    pub fn step(&mut self, clock: &dyn Clock) -> Result<Step, WasmError> {
        let generation = self
            .active
            .as_mut()
            .ok_or_else(|| WasmError::new(ErrorCode::InvalidState, "no generation in progress"))?;
        let step = generation.step(&mut self.ctx, clock);
        if !matches!(
            step,
            Ok(GenerationStep::Pending
                | GenerationStep::Prefilled { .. }
                | GenerationStep::Tokens { .. })
        ) {
            self.active = None;
        }
        Ok(step?.into())
    }

    /// Ends the generation in progress (if any) and returns its statistics.
    pub fn cancel(&mut self, clock: &dyn Clock) -> Option<GenerateStats> {
        self.active.take()?.cancel(clock)
    }
}

fn context_params(options: &LoadOptions) -> ContextParams {
    let defaults = ContextParams::default();
    ContextParams {
        n_ctx: options.context_size.unwrap_or(defaults.n_ctx),
        n_batch: options.batch_size.unwrap_or(defaults.n_batch).max(1),
    }
}
