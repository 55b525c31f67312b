//! A loaded model with its context, generating one token per call.
//!
//! `tessera_runtime::generate::generate` runs a whole generation in one call. In the browser the worker
//! must get back to its event loop between tokens (to post each token to the page and to hear
//! an abort), so this is the same loop cut into steps: [`Session::begin`] checks the request
//! and primes the sampler, each [`Session::step`] decodes a slice of the prompt or produces one
//! token's text, and [`Session::cancel`] ends it early. Outputs and the KV cache left behind
//! are those of `generate` (tests/session.rs compares them).
//!
//! On a backend whose results come back asynchronously (WebGPU in a browser) a step may end
//! with [`Step::pending`]: the step's work was submitted and nothing else changed; the caller
//! awaits the backend's read-back and calls [`Session::step`] again, which then completes it.
//!
//! With draftless speculative decoding ([`Session::begin_with`], CPU only) a decode step
//! verifies a draft in one batch and may commit several tokens, exactly the ones plain
//! decoding gives (`tessera_runtime::speculative`'s loop, cut into the same steps).

use std::sync::Arc;

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::Backend;
use tessera_tokenizer::chat_template::{ChatMessage, ChatTemplate};
use tessera_runtime::generate::{
    prompt_sampler, tokenize_chat, Clock, GenerateError, GenerateParams, GenerateStats, StopReason,
};
use tessera_core::sampling::{DeviceSampling, Sampler};
use tessera_runtime::speculative::{verify_draft, SpecParams, SpecType, SpeculatorChain};
use tessera_runtime::stop::StopMatcher;
use tessera_tokenizer::StreamDecoder;
use tessera_core::{Context, ContextParams, EngineError, Model, ThreadPool};

use crate::errors::{ErrorCode, WasmError};
use crate::options::LoadOptions;

/// Prompt tokens decoded per step: small enough that an abort is heard within a fraction of a
/// second, large enough to keep the batched matmuls efficient. Any split gives the same logits.
const PREFILL_STEP: usize = 128;

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

/// Where a generation's tokens are picked.
#[derive(Clone, Copy, PartialEq)]
enum Picking {
    /// From the logits, read back, by the generation's sampler.
    Cpu,
    /// The device's arg-max (greedy without penalties or biases: no draw, no options).
    DeviceGreedy,
    /// The device's sampling chain, with the options and draw of the sampler's `device_step`.
    DeviceSampled,
}

enum Phase {
    /// Decoding the prompt from this index on.
    Prefill(usize),
    /// The prompt is decoded; the next step samples the first token.
    FirstToken,
    /// This sampled token must be decoded before the next one is sampled.
    Decode(u32),
}

struct Generation {
    prompt: Vec<u32>,
    params: GenerateParams,
    sampler: Sampler,
    stops: StopMatcher,
    /// Bytes of a UTF-8 character split across tokens, held until it is complete.
    partial_char: Vec<u8>,
    tokens: Vec<u32>,
    phase: Phase,
    /// Prompt tokens reused from the KV cache.
    kept: usize,
    picking: Picking,
    /// The token the device chose after the last decoded step.
    next: Option<u32>,
    /// The sampling step of a pending `DeviceSampled` step: its draw is taken once, and the
    /// repeated call (after the read-back) must be the same step.
    draw: Option<DeviceSampling>,
    t_start: f64,
    t_prompt_done: f64,
    /// Draftless speculative decoding, when requested.
    spec: Option<Speculation>,
}

/// A generation's speculative state.
struct Speculation {
    chain: SpeculatorChain,
    /// The tokens in the KV cache (prompt, then committed tokens), which drafts are looked up in.
    history: Vec<u32>,
    n_drafted: usize,
    n_accepted: usize,
}

/// Speculative decoding's statistics for one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecReport {
    /// Draft tokens verified, and accepted.
    pub n_drafted: usize,
    pub n_accepted: usize,
    /// llama.cpp's lines: the acceptance rate, then one line per speculator.
    pub lines: Vec<String>,
}

/// What one step produced.
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

impl Step {
    fn text(text: String) -> Step {
        Step {
            text,
            finished: None,
            pending: false,
            speculative: None,
        }
    }
}

/// `Ok(None)` when the backend only submitted the step ([`EngineError::ReadBackPending`]).
fn submitted<T>(r: Result<T, EngineError>) -> Result<Option<T>, WasmError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(EngineError::ReadBackPending) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Decodes `tokens` and picks the next token as `g.picking` says: on the device into `g.next`,
/// or leaves the logits in the context for the sampler. `false`: the step is pending (an
/// asynchronous backend), and the same call must be repeated after the read-back.
fn decode_step(ctx: &mut Context, g: &mut Generation, tokens: &[u32]) -> Result<bool, WasmError> {
    match g.picking {
        Picking::Cpu => Ok(submitted(ctx.decode(tokens, false))?.is_some()),
        Picking::DeviceGreedy => match submitted(ctx.decode_greedy(tokens, false))? {
            Some(ids) => {
                g.next = ids.last().copied();
                Ok(true)
            }
            None => Ok(false),
        },
        Picking::DeviceSampled => {
            let step = g.draw.get_or_insert_with(|| g.sampler.device_step());
            match ctx.decode_sampled(tokens, step) {
                Err(EngineError::ReadBackPending) => Ok(false),
                r => {
                    g.draw = None;
                    g.next = Some(r??);
                    Ok(true)
                }
            }
        }
    }
}

fn pending_step() -> Step {
    Step {
        pending: true,
        ..Step::text(String::new())
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
        let template = ChatTemplate::from_gguf(model.weights().file().header(), model.tokenizer())
            .ok()
            .flatten();
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

    /// Renders and tokenizes a conversation with the model's chat template.
    pub fn chat_prompt(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, WasmError> {
        let template = self
            .template
            .as_ref()
            .ok_or_else(|| WasmError::from(GenerateError::NoChatTemplate))?;
        Ok(tokenize_chat(self.model.tokenizer(), template, messages)?)
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
        let spec = match spec {
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
                let mut chain = SpeculatorChain::from_params(&p, None, None, None)?;
                chain.begin(&prompt)?;
                Some(Speculation {
                    chain,
                    history: prompt.clone(),
                    n_drafted: 0,
                    n_accepted: 0,
                })
            }
            _ => None,
        };
        self.check_sequence(&prompt)?;
        let sampler = prompt_sampler(&params, self.model.tokenizer(), &prompt)?;
        let common = self
            .ctx
            .tokens()
            .iter()
            .zip(&prompt)
            .take_while(|(a, b)| a == b)
            .count();
        // At least one prompt token is decoded, for fresh logits.
        let kept = common.min(prompt.len() - 1);
        self.ctx.truncate(kept);
        let stops = StopMatcher::new(&params.stop);
        let now = clock.now_s();
        let s = &params.sampling;
        let greedy = s.temperature <= 0.0
            && s.repeat_penalty == 1.0
            && s.presence_penalty == 0.0
            && s.frequency_penalty == 0.0
            && s.logit_bias.is_empty()
            && !params.ignore_eos;
        let picking = match (self.device_sampling, greedy) {
            (false, _) => Picking::Cpu,
            (true, true) => Picking::DeviceGreedy,
            (true, false) => Picking::DeviceSampled,
        };
        self.active = Some(Generation {
            prompt,
            params,
            sampler,
            stops,
            partial_char: Vec::new(),
            tokens: Vec::new(),
            phase: Phase::Prefill(kept),
            kept,
            picking,
            next: None,
            draw: None,
            t_start: now,
            t_prompt_done: now,
            spec,
        });
        Ok(())
    }

    /// A prompt or forced sequence must be non-empty, fit the context and hold known ids.
    fn check_sequence(&self, ids: &[u32]) -> Result<(), WasmError> {
        if ids.is_empty() {
            return Err(GenerateError::EmptyPrompt.into());
        }
        if ids.len() > self.ctx.n_ctx() {
            return Err(GenerateError::PromptTooLong {
                n_prompt: ids.len(),
                n_ctx: self.ctx.n_ctx(),
            }
            .into());
        }
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.model.n_vocab()) {
            return Err(tessera_core::EngineError::BadToken {
                id,
                n_vocab: self.model.n_vocab(),
            }
            .into());
        }
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
        self.check_sequence(ids)?;
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
        submitted(self.ctx.decode_greedy(&ids[from..to], true))
    }

    /// Advances the generation by one slice of prompt or one token. An error ends it.
    pub fn step(&mut self, clock: &dyn Clock) -> Result<Step, WasmError> {
        let mut g = self
            .active
            .take()
            .ok_or_else(|| WasmError::new(ErrorCode::InvalidState, "no generation in progress"))?;
        let step = self.advance(&mut g, clock)?;
        if step.finished.is_none() {
            self.active = Some(g);
        }
        Ok(step)
    }

    /// Ends the generation in progress (if any) and returns its statistics.
    pub fn cancel(&mut self, clock: &dyn Clock) -> Option<GenerateStats> {
        let mut g = self.active.take()?;
        if matches!(g.phase, Phase::Prefill(_)) {
            g.t_prompt_done = clock.now_s();
        }
        Some(
            finish(
                &mut g,
                StopReason::Cancelled,
                String::new(),
                self.model.tokenizer(),
                clock,
            )
            .1,
        )
    }

    fn advance(&mut self, g: &mut Generation, clock: &dyn Clock) -> Result<Step, WasmError> {
        let model = self.model.clone();
        let tokenizer = model.tokenizer();
        match g.phase {
            Phase::Prefill(from) => {
                // One micro-batch per step at most: a pending step must commit nothing.
                let to = (from + PREFILL_STEP.min(self.ctx.n_batch())).min(g.prompt.len());
                // A copy: the step below also updates the generation.
                let chunk = g.prompt[from..to].to_vec();
                let last = to == g.prompt.len();
                let decoded = match g.picking {
                    // Earlier slices of a sampled prompt: their next token is not wanted, so
                    // only an id leaves the device, not the logits.
                    Picking::DeviceGreedy | Picking::DeviceSampled if !last => {
                        submitted(self.ctx.decode_greedy(&chunk, false))?.is_some()
                    }
                    _ => decode_step(&mut self.ctx, g, &chunk)?,
                };
                if !decoded {
                    return Ok(pending_step());
                }
                g.phase = if last {
                    g.t_prompt_done = clock.now_s();
                    Phase::FirstToken
                } else {
                    Phase::Prefill(to)
                };
                return Ok(Step::text(String::new()));
            }
            Phase::Decode(token) => {
                if self.ctx.n_past() + 1 > self.ctx.n_ctx() {
                    return Ok(done(
                        g,
                        StopReason::ContextFull,
                        String::new(),
                        tokenizer,
                        clock,
                    ));
                }
                if let Some(step) = self.speculative_step(g, token, clock)? {
                    return Ok(step);
                }
                if !decode_step(&mut self.ctx, g, &[token])? {
                    return Ok(pending_step());
                }
                if let Some(spec) = &mut g.spec {
                    spec.history.push(token);
                }
            }
            Phase::FirstToken => {}
        }
        let max_reached = |g: &Generation| g.params.max_tokens.is_some_and(|m| g.tokens.len() >= m);
        if max_reached(g) {
            return Ok(done(
                g,
                StopReason::MaxTokens,
                String::new(),
                tokenizer,
                clock,
            ));
        }
        let token = match g.next.take() {
            Some(t) => t,
            None => g.sampler.sample(self.ctx.logits())?,
        };
        g.sampler.accept(token);
        Ok(emit(g, &[token], tokenizer, clock))
    }

    /// With a speculator, a draft for after `token` verified in one batch: `None` when there
    /// is no draft (the step decodes `token` alone).
    fn speculative_step(
        &mut self,
        g: &mut Generation,
        token: u32,
        clock: &dyn Clock,
    ) -> Result<Option<Step>, WasmError> {
        let Some(spec) = &mut g.spec else {
            return Ok(None);
        };
        let n_past = self.ctx.n_past();
        // Room for the draft: the context, the batch, and the tokens still wanted (a draft of
        // k commits at most k + 1 tokens).
        let wanted = g
            .params
            .max_tokens
            .map_or(usize::MAX, |m| m.saturating_sub(g.tokens.len()));
        let room = (self.ctx.n_ctx() - n_past - 1)
            .min(self.ctx.n_batch().max(1) - 1)
            .min(wanted.saturating_sub(1));
        if room == 0 {
            return Ok(None);
        }
        let draft = spec.chain.draft(&spec.history, token, room)?;
        if draft.is_empty() {
            return Ok(None);
        }
        let mut batch = Vec::with_capacity(draft.len() + 1);
        batch.push(token);
        batch.extend_from_slice(&draft);
        self.ctx.decode(&batch, true)?;
        let n_vocab = self.model.n_vocab();
        let verified = verify_draft(&mut g.sampler, &draft, self.ctx.all_logits(), n_vocab)?;
        // Keep `token` and the accepted draft tokens; forget the rejected ones.
        self.ctx.truncate(n_past + 1 + verified.n_accepted);
        spec.chain.accept(verified.n_accepted);
        spec.n_drafted += draft.len();
        spec.n_accepted += verified.n_accepted;
        spec.history.push(token);
        spec.history
            .extend_from_slice(&verified.tokens[..verified.n_accepted]);
        Ok(Some(emit(
            g,
            &verified.tokens,
            self.model.tokenizer(),
            clock,
        )))
    }
}

/// Hands out committed tokens (already accepted by the sampler) in order, as plain decoding
/// would, ending the generation at the first that ends it; the last one is decoded next.
fn emit(
    g: &mut Generation,
    tokens: &[u32],
    tokenizer: &tessera_tokenizer::Tokenizer,
    clock: &dyn Clock,
) -> Step {
    let mut text = String::new();
    for &token in tokens {
        g.tokens.push(token);
        if tokenizer.is_eog(token) && !g.params.ignore_eos {
            return done(
                g,
                StopReason::EndOfGeneration(token),
                text,
                tokenizer,
                clock,
            );
        }
        let piece = decode_utf8(tokenizer, &mut g.partial_char, token);
        let out = g.stops.push(&piece);
        text.push_str(&out.text);
        if let Some(i) = out.stopped {
            return done(g, StopReason::StopString(i), text, tokenizer, clock);
        }
        if g.params.max_tokens.is_some_and(|m| g.tokens.len() >= m) {
            return done(g, StopReason::MaxTokens, text, tokenizer, clock);
        }
    }
    if let Some(&last) = tokens.last() {
        g.phase = Phase::Decode(last);
    }
    Step::text(text)
}

fn done(
    g: &mut Generation,
    reason: StopReason,
    text: String,
    tokenizer: &tessera_tokenizer::Tokenizer,
    clock: &dyn Clock,
) -> Step {
    let (text, stats) = finish(g, reason, text, tokenizer, clock);
    let speculative = g.spec.as_ref().map(|s| SpecReport {
        n_drafted: s.n_drafted,
        n_accepted: s.n_accepted,
        lines: s.chain.stats_lines(),
    });
    Step {
        text,
        finished: Some(stats),
        pending: false,
        speculative,
    }
}

/// Flushes held-back text (unless a stop string or the caller ended it) and computes the stats.
fn finish(
    g: &mut Generation,
    reason: StopReason,
    mut text: String,
    tokenizer: &tessera_tokenizer::Tokenizer,
    clock: &dyn Clock,
) -> (String, GenerateStats) {
    if !matches!(reason, StopReason::StopString(_) | StopReason::Cancelled) {
        let mut decoder = StreamDecoder::new(tokenizer, false);
        decoder.push_bytes(&std::mem::take(&mut g.partial_char));
        let rest = g.stops.push(&decoder.finish());
        text.push_str(&rest.text);
        if rest.stopped.is_none() {
            text.push_str(&g.stops.finish());
        }
    }
    let now = clock.now_s();
    let prefilled = !matches!(g.phase, Phase::Prefill(_)) || reason == StopReason::Cancelled;
    let stats = GenerateStats {
        n_prompt_eval: g.prompt.len() - g.kept,
        n_prompt: g.prompt.len(),
        n_generated: g.tokens.len(),
        prompt_s: if prefilled {
            g.t_prompt_done - g.t_start
        } else {
            0.0
        },
        generate_s: if prefilled {
            now - g.t_prompt_done
        } else {
            0.0
        },
        stop: reason,
        tokens: std::mem::take(&mut g.tokens),
    };
    (text, stats)
}

/// The text `token` completes, carrying an incomplete UTF-8 character over in `partial`
/// (the engine's `StreamDecoder`, whose state lives here between steps).
fn decode_utf8(
    tokenizer: &tessera_tokenizer::Tokenizer,
    partial: &mut Vec<u8>,
    token: u32,
) -> String {
    let mut decoder = StreamDecoder::new(tokenizer, false);
    let mut text = decoder.push_bytes(partial);
    text.push_str(&decoder.push(token));
    *partial = decoder.pending().to_vec();
    text
}

fn context_params(options: &LoadOptions) -> ContextParams {
    let defaults = ContextParams::default();
    ContextParams {
        n_ctx: options.context_size.unwrap_or(defaults.n_ctx),
        n_batch: options.batch_size.unwrap_or(defaults.n_batch).max(1),
    }
}
