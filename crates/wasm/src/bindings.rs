//! The JS-facing classes. Every error becomes a JS `Error` whose `code` is the stable
//! [`ErrorCode`](crate::errors::ErrorCode) string.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tessera_core::{Model, ThreadPool};
use tessera_runtime::chat_output::ChatOutput;
use tessera_runtime::generate::{Clock, GenerateStats, StopReason};
use tessera_runtime::request::{self, Message};
use wasm_bindgen::prelude::*;

use crate::chat::ChatReading;
use crate::errors::{ErrorCode, WasmError};
use crate::loader::ModelLoader;
use crate::options::{generation_params, LoadOptions};
use crate::session::Session;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: exists in windows, workers and Node.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;

    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

/// A panic aborts the module ("unreachable"); its message goes to the console first.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| console_error(&format!("tessera: {info}"))));
    });
}

struct PerformanceClock;

impl Clock for PerformanceClock {
    fn now_s(&self) -> f64 {
        performance_now() / 1000.0
    }
}

fn js_error(e: WasmError) -> JsValue {
    let err = js_sys::Error::new(&e.message);
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&err, &"code".into(), &e.code.as_str().into());
    err.into()
}

fn bad_argument(what: &str, e: impl std::fmt::Display) -> JsValue {
    js_error(WasmError::new(
        ErrorCode::InvalidArgument,
        format!("{what}: {e}"),
    ))
}

/// A request's generation fields (`undefined` or `null`: none), checked by the runtime's
/// request model.
fn request_options(options: JsValue) -> Result<request::Options, JsValue> {
    if options.is_undefined() || options.is_null() {
        return Ok(request::Options::default());
    }
    request::deserialize(serde_wasm_bindgen::Deserializer::from(options))
        .map_err(|e| js_error(e.into()))
}

fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| js_error(WasmError::new(ErrorCode::InvalidState, e.to_string())))
}

fn from_js<T: serde::de::DeserializeOwned + Default>(what: &str, v: JsValue) -> Result<T, JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok(T::default());
    }
    serde_wasm_bindgen::from_value(v).map_err(|e| bad_argument(what, e))
}

/// Which build this is: the JS side reports it (and the tests check it).
#[wasm_bindgen(js_name = buildKind)]
pub fn build_kind() -> String {
    if cfg!(feature = "threads") {
        "threads"
    } else {
        "single"
    }
    .into()
}

/// Whether this build's kernels are exact here: always for the SIMD128 build; the relaxed-SIMD
/// build only where the engine's `f32x4.relaxed_madd` is fused and its `relaxed_dot` exact
/// (the loader falls back to the SIMD128 build otherwise).
#[wasm_bindgen(js_name = kernelsExact)]
pub fn kernels_exact() -> bool {
    #[cfg(target_feature = "relaxed-simd")]
    {
        tessera_quant::vec_dot::relaxed_simd_is_exact()
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    true
}

/// Receives the model's bytes: `beginShard` per file (one for an unsplit model), `push` each
/// chunk, then `load`. `new ModelLoader()` gathers them in the wasm heap, for the CPU backend;
/// `ModelLoader.onGpu(gpu)` writes every tensor straight into buffers of the WebGPU device
/// `gpu` (from `requestWebGpu`) as it arrives, so the wasm heap never holds the model. A GPU
/// that cannot take the model rejects with `BACKEND_ERROR` (from `push`, as soon as the header
/// has arrived when the length is known, else from `load`), one whose kernels lack a tensor's
/// type with `UNSUPPORTED_TYPE` (once the header has arrived).
#[wasm_bindgen(js_name = ModelLoader)]
pub struct JsModelLoader(Option<Receiver>);

enum Receiver {
    Heap(ModelLoader),
    #[cfg(feature = "webgpu")]
    Gpu(Box<crate::gpu_loader::GpuModelLoader>),
}

#[wasm_bindgen(js_class = ModelLoader)]
impl JsModelLoader {
    #[wasm_bindgen(constructor)]
    pub fn new() -> JsModelLoader {
        install_panic_hook();
        JsModelLoader(Some(Receiver::Heap(ModelLoader::new())))
    }

    #[cfg(feature = "webgpu")]
    #[wasm_bindgen(js_name = onGpu)]
    pub fn on_gpu(gpu: &WebGpu) -> JsModelLoader {
        install_panic_hook();
        let loader = crate::gpu_loader::GpuModelLoader::new(gpu.0.clone());
        JsModelLoader(Some(Receiver::Gpu(Box::new(loader))))
    }

    fn inner(&mut self) -> Result<&mut Receiver, JsValue> {
        self.0.as_mut().ok_or_else(|| js_error(used_loader()))
    }

    /// `expectedBytes`: the shard's size when known (the heap buffer is reserved once; the
    /// GPU buffers are made as soon as the header has arrived).
    #[wasm_bindgen(js_name = beginShard)]
    pub fn begin_shard(&mut self, expected_bytes: Option<f64>) -> Result<(), JsValue> {
        let expected = expected_bytes.filter(|n| *n >= 0.0).map(|n| n as u64);
        match self.inner()? {
            Receiver::Heap(l) => l.begin_shard(expected),
            #[cfg(feature = "webgpu")]
            Receiver::Gpu(l) => l.begin_shard(expected),
        }
        .map_err(js_error)
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        match self.inner()? {
            Receiver::Heap(l) => l.push(chunk),
            #[cfg(feature = "webgpu")]
            Receiver::Gpu(l) => l.push(chunk),
        }
        .map_err(js_error)
    }

    pub fn received(&self) -> f64 {
        let received = match &self.0 {
            None => 0,
            Some(Receiver::Heap(l)) => l.received(),
            #[cfg(feature = "webgpu")]
            Some(Receiver::Gpu(l)) => l.received(),
        };
        received as f64
    }

    /// Opens the model and makes its context. `options`: `{ context_size, batch_size }`. On the
    /// GPU, steps then submit GPU work and report `pending` until `readBack()` resolves.
    pub fn load(&mut self, options: JsValue) -> Result<Engine, JsValue> {
        let options: LoadOptions = from_js("load options", options)?;
        // Chat templates that write today's date (strftime_now) read the page's clock.
        tessera_tokenizer::chat_template::set_wall_clock(|| (js_sys::Date::now() / 1000.0) as i64);
        match self.0.take().ok_or_else(|| js_error(used_loader()))? {
            Receiver::Heap(loader) => {
                let file = loader.finish().map_err(js_error)?;
                let model = Model::load(file, &mut |_| {}).map_err(|e| js_error(e.into()))?;
                let session =
                    Session::new(Arc::new(model), &options, thread_pool()?).map_err(js_error)?;
                Ok(Engine {
                    session,
                    backend: Backend::Cpu,
                    chat: ChatReading::default(),
                })
            }
            #[cfg(feature = "webgpu")]
            Receiver::Gpu(loader) => {
                let loader = *loader;
                let gpu = loader.gpu().clone();
                let session = loader.finish(&options).map_err(js_error)?;
                Ok(Engine {
                    session,
                    backend: Backend::WebGpu {
                        signal: gpu.read_back_signal(),
                        adapter: gpu.describe(),
                    },
                    chat: ChatReading::default(),
                })
            }
        }
    }
}

fn used_loader() -> WasmError {
    WasmError::new(ErrorCode::InvalidState, "loader already used")
}

/// A WebGPU device (wgpu on the browser's `navigator.gpu`), made by `requestWebGpu`.
#[cfg(feature = "webgpu")]
#[wasm_bindgen]
pub struct WebGpu(tessera_backend_wgpu::Gpu);

#[cfg(feature = "webgpu")]
#[wasm_bindgen]
impl WebGpu {
    /// Adapter name, backend, shader-f16, binding limit.
    pub fn describe(&self) -> String {
        self.0.describe()
    }
}

/// Opens the browser's WebGPU adapter and a device with the adapter's own limits; rejects with
/// `BACKEND_ERROR` when there is no adapter or it refuses a device.
#[cfg(feature = "webgpu")]
#[wasm_bindgen(js_name = requestWebGpu)]
pub async fn request_web_gpu() -> Result<WebGpu, JsValue> {
    install_panic_hook();
    tessera_backend_wgpu::Gpu::new()
        .await
        .map(WebGpu)
        .map_err(|e| js_error(WasmError::new(ErrorCode::BackendError, e.to_string())))
}

/// Whether this build has the WebGPU backend.
#[wasm_bindgen(js_name = hasWebGpu)]
pub fn has_web_gpu() -> bool {
    cfg!(feature = "webgpu")
}

impl Default for JsModelLoader {
    fn default() -> Self {
        JsModelLoader::new()
    }
}

#[cfg(feature = "threads")]
fn thread_pool() -> Result<Arc<dyn ThreadPool>, JsValue> {
    crate::rayon_pool::shared_pool().map_err(|e| js_error(e.into()))
}

#[cfg(not(feature = "threads"))]
fn thread_pool() -> Result<Arc<dyn ThreadPool>, JsValue> {
    Ok(Arc::new(tessera_core::SequentialPool))
}

/// A loaded model and its context.
#[wasm_bindgen]
pub struct Engine {
    session: Session,
    backend: Backend,
    chat: ChatReading,
}

enum Backend {
    Cpu,
    #[cfg(feature = "webgpu")]
    WebGpu {
        signal: tessera_backend_wgpu::device::ReadBackSignal,
        adapter: String,
    },
}

#[derive(Serialize)]
struct ModelInfo {
    architecture: String,
    description: String,
    n_vocab: usize,
    n_ctx: usize,
    n_ctx_train: usize,
    has_chat_template: bool,
    build: String,
    threads: usize,
    /// "wasm" or "webgpu".
    backend: &'static str,
    /// The WebGPU adapter, when the backend is "webgpu".
    adapter: Option<String>,
    /// The kernels' instruction set: "simd128" or "simd128+relaxed".
    simd: &'static str,
    /// Size of the wasm heap now (on WebGPU it holds the headers, not the model).
    heap_bytes: f64,
}

#[derive(Serialize)]
struct StepResult {
    text: String,
    done: bool,
    /// OpenAI's names: "stop" (end of generation or a stop string), "length" (token limit or
    /// full context), "abort".
    finish_reason: Option<&'static str>,
    stats: Option<Stats>,
    /// The step was submitted to the GPU: await `readBack()`, then call `step` again.
    pending: bool,
    /// With `done`, when the generation was speculative.
    speculative: Option<SpeculativeStats>,
    /// A chat answer read into parts (tools offered, or a thinking model): what this step
    /// added, in OpenAI's delta shape (`content`, `reasoning_content`, `tool_calls`).
    delta: Option<Value>,
    /// With `done`, the whole assistant message of such an answer.
    message: Option<Value>,
}

#[derive(Serialize)]
struct SpeculativeStats {
    /// Draft tokens verified, and accepted.
    drafted: usize,
    accepted: usize,
    /// llama.cpp's statistics lines (`draft acceptance rate = ...`, one per speculator).
    lines: Vec<String>,
}

#[derive(Serialize)]
struct Stats {
    prompt_tokens: usize,
    prompt_tokens_evaluated: usize,
    completion_tokens: usize,
    prompt_ms: f64,
    generation_ms: f64,
    prompt_tokens_per_s: f64,
    generation_tokens_per_s: f64,
    stop: String,
    tokens: Vec<u32>,
}

impl Stats {
    fn new(s: &GenerateStats) -> (Stats, &'static str) {
        let (reason, stop) = match s.stop {
            StopReason::EndOfGeneration(id) => ("stop", format!("eog:{id}")),
            StopReason::StopString(i) => ("stop", format!("stop_string:{i}")),
            StopReason::MaxTokens => ("length", "max_tokens".into()),
            StopReason::ContextFull => ("length", "context_full".into()),
            StopReason::Cancelled => ("abort", "cancelled".into()),
            StopReason::GrammarComplete => ("stop", "grammar_complete".into()),
        };
        let stats = Stats {
            prompt_tokens: s.n_prompt,
            prompt_tokens_evaluated: s.n_prompt_eval,
            completion_tokens: s.n_generated,
            prompt_ms: s.prompt_s * 1e3,
            generation_ms: s.generate_s * 1e3,
            prompt_tokens_per_s: s.prompt_tokens_per_s(),
            generation_tokens_per_s: s.generate_tokens_per_s(),
            stop,
            tokens: s.tokens.clone(),
        };
        (stats, reason)
    }
}

#[wasm_bindgen]
impl Engine {
    pub fn info(&self) -> Result<JsValue, JsValue> {
        let model = self.session.model();
        to_js(&ModelInfo {
            architecture: model.arch().to_string(),
            description: model.describe(),
            n_vocab: model.n_vocab(),
            n_ctx: self.session.n_ctx(),
            n_ctx_train: model.n_ctx_train(),
            has_chat_template: self.session.has_chat_template(),
            build: build_kind(),
            threads: match self.backend {
                Backend::Cpu => thread_pool()?.n_threads(),
                #[cfg(feature = "webgpu")]
                Backend::WebGpu { .. } => 1,
            },
            backend: match self.backend {
                Backend::Cpu => "wasm",
                #[cfg(feature = "webgpu")]
                Backend::WebGpu { .. } => "webgpu",
            },
            adapter: match &self.backend {
                Backend::Cpu => None,
                #[cfg(feature = "webgpu")]
                Backend::WebGpu { adapter, .. } => Some(adapter.clone()),
            },
            simd: tessera_quant::vec_dot::kernel_isa(),
            heap_bytes: (core::arch::wasm32::memory_size(0) as f64) * 65536.0,
        })
    }

    /// Resolves once the GPU step submitted by the last `step` (the one that returned
    /// `pending`) can be read back; at once on the CPU backend.
    #[wasm_bindgen(js_name = readBack)]
    pub fn read_back(&self) -> js_sys::Promise {
        match &self.backend {
            Backend::Cpu => js_sys::Promise::resolve(&JsValue::UNDEFINED),
            #[cfg(feature = "webgpu")]
            Backend::WebGpu { signal, .. } => {
                let ready = signal.ready();
                wasm_bindgen_futures::future_to_promise(async move {
                    ready.await;
                    Ok(JsValue::UNDEFINED)
                })
            }
        }
    }

    /// `addSpecial`: BOS/EOS per the model's policy; `parseSpecial`: control-token text such as
    /// `<|im_start|>` becomes its id.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.session
            .model()
            .tokenizer()
            .encode(text, add_special, parse_special)
    }

    /// `special`: render control tokens' text.
    pub fn detokenize(&self, ids: Vec<u32>, special: bool) -> Result<String, JsValue> {
        let n_vocab = self.session.model().n_vocab();
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= n_vocab) {
            return Err(js_error(
                tessera_core::EngineError::BadToken { id, n_vocab }.into(),
            ));
        }
        Ok(self.session.model().tokenizer().decode(&ids, special))
    }

    /// Renders `messages` (OpenAI's, checked by the runtime's request model) with the model's
    /// chat template and tokenizes it; `options` are the request's fields (tools, thinking
    /// switches, `parse_special_in_content`). The next `begin` of these ids follows the
    /// request's tool-call grammar and reads its answer into parts.
    #[wasm_bindgen(js_name = chatPrompt)]
    pub fn chat_prompt(
        &mut self,
        messages: JsValue,
        options: JsValue,
    ) -> Result<Vec<u32>, JsValue> {
        let messages: Vec<Message> = request::deserialize_field(
            "messages",
            serde_wasm_bindgen::Deserializer::from(messages),
        )
        .map_err(|e| js_error(e.into()))?;
        let messages = request::chat_messages(&messages).map_err(|e| js_error(e.into()))?;
        let options = request_options(options)?;
        options.check_supported().map_err(|e| js_error(e.into()))?;
        let prepared = self
            .session
            .chat_prompt(messages, &options)
            .map_err(js_error)?;
        Ok(self.chat.plan(prepared))
    }

    /// Starts a generation after the prompt `ids` with a request's generation fields (checked
    /// by the runtime's request model); then call `step` until `done`.
    pub fn begin(&mut self, ids: Vec<u32>, options: JsValue) -> Result<(), JsValue> {
        let options = request_options(options)?;
        let model = self.session.model();
        let (mut params, spec) =
            generation_params(&options, model.n_vocab(), self.session.n_ctx()).map_err(js_error)?;
        self.chat.begin(&ids, &mut params);
        self.session
            .begin_with(ids, params, spec, &PerformanceClock)
            .map_err(js_error)
    }

    /// Forced decoding of `ids` (see `Session::predict_chunk`): the top-1 next token after
    /// each position of the slice decoded from `from`, or `undefined` when the slice is pending
    /// on the GPU (await `readBack()`, then repeat the call).
    #[wasm_bindgen(js_name = predictChunk)]
    pub fn predict_chunk(
        &mut self,
        ids: Vec<u32>,
        from: usize,
    ) -> Result<Option<Vec<u32>>, JsValue> {
        self.session.predict_chunk(&ids, from).map_err(js_error)
    }

    /// One slice of prompt or one token: `{ text, done, finish_reason, stats }` (and `delta`,
    /// `message` for a chat answer read into parts).
    pub fn step(&mut self) -> Result<JsValue, JsValue> {
        let step = self.session.step(&PerformanceClock).map_err(js_error)?;
        let done = step.finished.is_some();
        let read = match step.pending {
            true => None,
            false => Some(self.chat.read(&step.text, done)),
        };
        let message = read.as_ref().and_then(|r| r.message.as_ref());
        let called = message.is_some_and(|m| !m.tool_calls.is_empty());
        let (stats, finish_reason) = match &step.finished {
            Some(s) => {
                let (stats, reason) = Stats::new(s);
                (
                    Some(stats),
                    Some(if called && reason == "stop" {
                        "tool_calls"
                    } else {
                        reason
                    }),
                )
            }
            None => (None, None),
        };
        to_js(&StepResult {
            delta: read
                .as_ref()
                .and_then(|r| r.delta.as_ref())
                .map(|d| Value::Object(d.to_openai())),
            message: message.map(ChatOutput::to_openai),
            text: step.text,
            done,
            finish_reason,
            stats,
            pending: step.pending,
            speculative: step.speculative.map(|s| SpeculativeStats {
                drafted: s.n_drafted,
                accepted: s.n_accepted,
                lines: s.lines,
            }),
        })
    }

    /// Ends the generation in progress; its stats, or `null` when none was running.
    pub fn cancel(&mut self) -> Result<JsValue, JsValue> {
        match self.session.cancel(&PerformanceClock) {
            Some(s) => to_js(&Stats::new(&s).0),
            None => Ok(JsValue::NULL),
        }
    }

    #[wasm_bindgen(js_name = isGenerating)]
    pub fn is_generating(&self) -> bool {
        self.session.is_generating()
    }
}
