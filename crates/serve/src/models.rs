//! The models a server offers: one from `-m`, or a preset file's sections. Each is unloaded,
//! loading, ready (its tokenizer, chat template and slots) or failed; a request naming an
//! unloaded model starts its load and waits for it. The host (the CLI) decides how a model is
//! loaded and on which backend its slot contexts run ([`ModelHost`]).

use std::path::PathBuf;
use std::sync::Arc;

use tessera_core::context::Context;
use tessera_core::model::Model;
use tessera_tokenizer::chat_template::ChatTemplate;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::slots::{self, SlotsHandle};

/// One model the server offers.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// The name requests use (`model`), and `/v1/models` lists.
    pub name: String,
    pub path: PathBuf,
    /// Context of all slots together; each slot gets `n_ctx / parallel` (llama-server's split).
    pub n_ctx: usize,
    pub parallel: usize,
    pub load_on_startup: bool,
    /// When a slot's context fills, drop half of it (keeping the BOS) and go on, as
    /// llama-server's `--context-shift`; otherwise the answer ends (`finish_reason: "length"`).
    pub context_shift: bool,
}

/// What the host provides: loading a model file, and the slots' contexts (with their backend).
pub trait ModelHost: Send + Sync + 'static {
    fn load(&self, spec: &ModelSpec) -> Result<Arc<Model>, String>;
    /// A context of `n_seq` sequences of `n_ctx` positions each (`Context::with_sequences`).
    /// The server asks for one context holding every slot first (its slots then share one
    /// batch per step), and where that fails for one context per slot.
    fn context(
        &self,
        spec: &ModelSpec,
        model: &Arc<Model>,
        n_ctx: usize,
        n_seq: usize,
    ) -> Result<Context, String>;
}

/// A model ready to serve.
pub struct Loaded {
    pub name: String,
    pub model: Arc<Model>,
    pub template: Option<ChatTemplate>,
    pub slots: SlotsHandle,
    /// Positions of each slot's context.
    pub n_ctx_slot: usize,
    /// Positions a context shift keeps, when the model is served with one.
    pub shift_keep: Option<usize>,
}

#[derive(Clone)]
pub enum State {
    Unloaded,
    Loading,
    Ready(Arc<Loaded>),
    Failed(String),
}

impl State {
    /// The word `/v1/models` shows.
    pub fn word(&self) -> &'static str {
        match self {
            State::Unloaded => "unloaded",
            State::Loading => "loading",
            State::Ready(_) => "loaded",
            State::Failed(_) => "failed",
        }
    }
}

struct Entry {
    spec: ModelSpec,
    state: watch::Sender<State>,
}

pub struct Registry {
    entries: Vec<Entry>,
    host: Arc<dyn ModelHost>,
    /// Requests that may wait for a slot, per model.
    queue: usize,
}

impl Registry {
    pub fn new(specs: Vec<ModelSpec>, host: Arc<dyn ModelHost>, queue: usize) -> Arc<Registry> {
        let entries = specs
            .into_iter()
            .map(|spec| Entry {
                spec,
                state: watch::Sender::new(State::Unloaded),
            })
            .collect();
        Arc::new(Registry {
            entries,
            host,
            queue,
        })
    }

    /// Starts loading every model marked `load_on_startup`.
    pub fn load_startup_models(self: &Arc<Registry>) {
        for (i, e) in self.entries.iter().enumerate() {
            if e.spec.load_on_startup {
                self.start_loading(i);
            }
        }
    }

    /// Every model with its state, in the order given.
    pub fn list(&self) -> Vec<(ModelSpec, State)> {
        self.entries
            .iter()
            .map(|e| (e.spec.clone(), e.state.borrow().clone()))
            .collect()
    }

    /// Whether every start-up model has loaded (the health check's "ok").
    pub fn startup_models_ready(&self) -> bool {
        self.entries
            .iter()
            .filter(|e| e.spec.load_on_startup)
            .all(|e| matches!(*e.state.borrow(), State::Ready(_)))
    }

    /// The model a request names (any name when the server has one model), loaded first if
    /// need be.
    pub async fn get(self: &Arc<Registry>, name: Option<&str>) -> Result<Arc<Loaded>, ApiError> {
        let index = match (name, self.entries.len()) {
            (_, 1) | (None, _) => 0,
            (Some(n), _) => self
                .entries
                .iter()
                .position(|e| e.spec.name == n)
                .ok_or_else(|| ApiError::not_found(format!("model {n:?} not found")))?,
        };
        let entry = self
            .entries
            .get(index)
            .ok_or_else(|| ApiError::not_found("the server has no model"))?;
        let mut state = entry.state.subscribe();
        if matches!(*state.borrow(), State::Unloaded | State::Failed(_)) {
            self.start_loading(index);
        }
        loop {
            match &*state.borrow_and_update() {
                State::Ready(loaded) => return Ok(loaded.clone()),
                State::Failed(why) => {
                    return Err(ApiError::unavailable(format!(
                        "model {:?} failed to load: {why}",
                        entry.spec.name
                    )))
                }
                State::Unloaded | State::Loading => {}
            }
            state
                .changed()
                .await
                .map_err(|_| ApiError::internal("the model registry has stopped"))?;
        }
    }

    /// Loads model `index` on a thread of its own, unless it is loading or loaded.
    fn start_loading(self: &Arc<Registry>, index: usize) {
        let entry = &self.entries[index];
        let claimed = entry.state.send_if_modified(|s| match s {
            State::Unloaded | State::Failed(_) => {
                *s = State::Loading;
                true
            }
            _ => false,
        });
        if !claimed {
            return;
        }
        let registry = self.clone();
        std::thread::spawn(move || {
            let entry = &registry.entries[index];
            // A host that panics fails this model's load, not the server.
            let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                registry.load(&entry.spec)
            }));
            let state = match loaded {
                Ok(Ok(loaded)) => State::Ready(Arc::new(loaded)),
                Ok(Err(why)) => State::Failed(why),
                Err(_) => State::Failed("the model loader panicked".into()),
            };
            entry.state.send_replace(state);
        });
    }

    fn load(&self, spec: &ModelSpec) -> Result<Loaded, String> {
        let model = self.host.load(spec)?;
        let template = model
            .chat_template()
            .map_err(|e| format!("chat template: {e}"))?;
        let parallel = spec.parallel.max(1);
        let n_ctx_slot = spec.n_ctx / parallel;
        if n_ctx_slot == 0 {
            return Err(format!(
                "a context of {} is too small for {parallel} slots",
                spec.n_ctx
            ));
        }
        // All slots in one context, batched together, where the backend holds several
        // sequences; else (WebGPU) one context per slot, stepped in turn.
        let shared = match parallel {
            1 => None,
            _ => self.host.context(spec, &model, n_ctx_slot, parallel).ok(),
        };
        let contexts = match shared {
            Some(ctx) => vec![ctx],
            None => (0..parallel)
                .map(|_| self.host.context(spec, &model, n_ctx_slot, 1))
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(Loaded {
            name: spec.name.clone(),
            shift_keep: spec
                .context_shift
                .then(|| model.tokenizer().add_bos() as usize),
            model,
            template,
            slots: slots::start(contexts, self.queue),
            n_ctx_slot,
        })
    }
}
