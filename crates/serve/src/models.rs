//! The models a server offers: one from `-m`, or a preset file's sections. Each is unloaded,
//! loading, ready (its tokenizer, chat template and slots) or failed; a request naming an
//! unloaded model starts its load and waits for it. The host (the CLI) decides how a model is
//! loaded and on which backend its slot contexts run ([`ModelHost`]).
//!
//! Any caller with the key can name any preset model, so loading is bounded:
//! - At most [`ModelLimits::models_max`] models are loaded or loading at once (llama-server's
//!   `--models-max`). Loading one more first unloads the least recently used ready model that
//!   serves nobody. When every loaded model is busy the request gets 503 with `Retry-After`
//!   at once (llama-server queues it instead; a 503 holds no connection open).
//! - A failed model is tried again only after a back-off (10 s, doubling up to 5 min); within
//!   it, requests get 503 with `Retry-After` at once, so callers cannot make the server reload
//!   a broken model in a loop.
//! - Clients learn that a model failed, never why: the reason names files and carries the
//!   host's messages, so it goes to the server log (stderr) only.

mod loaded;
mod state;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_core::context::Context;
use tessera_core::model::Model;
use tokio::sync::watch;

pub use self::loaded::{Loaded, Slots};
pub use self::state::{backoff, Failure, State, Status};
use crate::error::ApiError;

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
/// Its errors go to the server log, never to clients.
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

/// llama-server's default `--models-max`.
pub const DEFAULT_MODELS_MAX: usize = 4;

/// How much a registry may hold and how it treats failures.
#[derive(Clone, Debug)]
pub struct ModelLimits {
    /// Requests that may wait for a slot, per model.
    pub queue: usize,
    /// Models loaded (or loading) at once; 0: no cap.
    pub models_max: usize,
    /// The back-off after a model's first failed load; it doubles with each failure in a row.
    pub retry_first: Duration,
    /// The longest back-off.
    pub retry_max: Duration,
}

impl ModelLimits {
    /// The defaults: [`DEFAULT_MODELS_MAX`] models, back-off from 10 s to 5 min.
    pub fn new(queue: usize) -> ModelLimits {
        ModelLimits {
            queue,
            models_max: DEFAULT_MODELS_MAX,
            retry_first: Duration::from_secs(10),
            retry_max: Duration::from_secs(300),
        }
    }

    /// Refuses more start-up models than the cap allows (llama-server refuses to start too:
    /// the later ones would unload the earlier ones).
    pub fn check_startup(&self, specs: &[ModelSpec]) -> Result<(), String> {
        let n = specs.iter().filter(|s| s.load_on_startup).count();
        if self.models_max > 0 && n > self.models_max {
            return Err(format!(
                "{n} models load on start-up, more than --models-max {}",
                self.models_max
            ));
        }
        Ok(())
    }
}

struct Entry {
    spec: ModelSpec,
    state: watch::Sender<State>,
    /// Requests waiting in [`Registry::get`] for this model: it is not unloaded under them.
    waiters: AtomicUsize,
    /// When a request last got this model (a tick of [`Registry::ticks`]), for LRU unloading.
    last_used: AtomicU64,
    /// Failed loads in a row, for the back-off.
    failures: AtomicU32,
    /// Whether it has loaded once: the health check waits for the start-up models' first
    /// load, not for models unloaded since to make room.
    loaded_once: AtomicBool,
}

pub struct Registry {
    entries: Vec<Entry>,
    host: Arc<dyn ModelHost>,
    limits: ModelLimits,
    /// Held while deciding to load (and unloading to make room), so that two requests cannot
    /// both take the last place under the cap. Never held across an await or a load.
    admission: Mutex<()>,
    ticks: AtomicU64,
}

/// Counts a request as waiting for a model while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(waiters: &'a AtomicUsize) -> Waiting<'a> {
        waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(waiters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Registry {
    /// A registry with the default [`ModelLimits`] and `queue` waiting requests per model.
    pub fn new(specs: Vec<ModelSpec>, host: Arc<dyn ModelHost>, queue: usize) -> Arc<Registry> {
        Registry::with_limits(specs, host, ModelLimits::new(queue))
    }

    pub fn with_limits(
        specs: Vec<ModelSpec>,
        host: Arc<dyn ModelHost>,
        limits: ModelLimits,
    ) -> Arc<Registry> {
        let entries = specs
            .into_iter()
            .map(|spec| Entry {
                spec,
                state: watch::Sender::new(State::Unloaded),
                waiters: AtomicUsize::new(0),
                last_used: AtomicU64::new(0),
                failures: AtomicU32::new(0),
                loaded_once: AtomicBool::new(false),
            })
            .collect();
        Arc::new(Registry {
            entries,
            host,
            limits,
            admission: Mutex::new(()),
            ticks: AtomicU64::new(0),
        })
    }

    /// Starts loading every model marked `load_on_startup`.
    pub fn load_startup_models(self: &Arc<Registry>) {
        for (i, e) in self.entries.iter().enumerate() {
            if e.spec.load_on_startup {
                if let Err(why) = self.start_loading(i) {
                    eprintln!(
                        "model {:?} not loaded at start: {}",
                        e.spec.name, why.message
                    );
                }
            }
        }
    }

    /// Every model with its state, in the order given.
    pub fn list(&self) -> Vec<(ModelSpec, Status)> {
        let now = Instant::now();
        self.entries
            .iter()
            .map(|e| (e.spec.clone(), Status::of(&e.state.borrow(), now)))
            .collect()
    }

    /// Whether every start-up model has loaded (the health check's "ok").
    pub fn startup_models_ready(&self) -> bool {
        self.entries
            .iter()
            .filter(|e| e.spec.load_on_startup)
            .all(|e| e.loaded_once.load(Ordering::SeqCst))
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
        let _waiting = Waiting::new(&entry.waiters);
        let mut state = entry.state.subscribe();
        loop {
            if let State::Ready(loaded) = &*state.borrow_and_update() {
                // Taken under the state's lock: an unload, which checks the count under the
                // same lock, sees this request's hold.
                entry.last_used.store(self.tick(), Ordering::SeqCst);
                return Ok(loaded.clone());
            }
            // Unloaded (perhaps since, to make room), or failed past its back-off: load it.
            // Loading: wait. Failed within the back-off: the 503 says when to come back.
            self.start_loading(index)?;
            state
                .changed()
                .await
                .map_err(|_| ApiError::internal("the model registry has stopped"))?;
        }
    }

    fn tick(&self) -> u64 {
        self.ticks.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Loads model `index` on a thread of its own, unless it is loading or loaded; first
    /// makes room under the cap. A 503 when it failed within its back-off or there is no room.
    fn start_loading(self: &Arc<Registry>, index: usize) -> Result<(), ApiError> {
        let entry = &self.entries[index];
        // Under this lock only the load thread changes a loading model's state; the states
        // checked here (unloaded, failed, ready) hold until it is released.
        let _admission = self.admission.lock().unwrap_or_else(|e| e.into_inner());
        match &*entry.state.borrow() {
            State::Loading | State::Ready(_) => return Ok(()),
            State::Failed(f) => {
                if let Some(seconds) = f.retry_after(Instant::now()) {
                    return Err(ApiError::model_failed(&entry.spec.name, seconds));
                }
            }
            State::Unloaded => {}
        }
        self.make_room(index)?;
        entry.state.send_replace(State::Loading);
        let registry = self.clone();
        std::thread::spawn(move || {
            let entry = &registry.entries[index];
            // A host that panics fails this model's load, not the server.
            let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                loaded::load(&*registry.host, &entry.spec, registry.limits.queue)
            }));
            let state = match loaded {
                Ok(Ok(loaded)) => {
                    entry.failures.store(0, Ordering::SeqCst);
                    entry.last_used.store(registry.tick(), Ordering::SeqCst);
                    entry.loaded_once.store(true, Ordering::SeqCst);
                    State::Ready(Arc::new(loaded))
                }
                Ok(Err(why)) => registry.failure(entry, &why),
                Err(_) => registry.failure(entry, "the model loader panicked"),
            };
            entry.state.send_replace(state);
        });
        Ok(())
    }

    /// Logs why `entry` failed to load and starts its back-off.
    fn failure(&self, entry: &Entry, why: &str) -> State {
        let failures = entry.failures.fetch_add(1, Ordering::SeqCst) + 1;
        let wait = backoff(failures, self.limits.retry_first, self.limits.retry_max);
        eprintln!(
            "model {:?} failed to load: {why} (failure {failures} in a row; next try in {} s \
             at the earliest)",
            entry.spec.name,
            wait.as_secs_f64().ceil()
        );
        State::Failed(Failure {
            until: Instant::now() + wait,
        })
    }

    /// Unloads least recently used idle models until model `index` fits under the cap; a 503
    /// when every loaded model serves a request. Called under the admission lock.
    fn make_room(&self, index: usize) -> Result<(), ApiError> {
        let max = self.limits.models_max;
        if max == 0 {
            return Ok(());
        }
        let others = || {
            self.entries
                .iter()
                .enumerate()
                .filter(move |(i, _)| *i != index)
        };
        loop {
            let held = others()
                .filter(|(_, e)| matches!(*e.state.borrow(), State::Loading | State::Ready(_)))
                .count();
            if held < max {
                return Ok(());
            }
            let mut ready: Vec<usize> = others()
                .filter(|(_, e)| matches!(*e.state.borrow(), State::Ready(_)))
                .map(|(i, _)| i)
                .collect();
            ready.sort_by_key(|&i| self.entries[i].last_used.load(Ordering::SeqCst));
            let name = &self.entries[index].spec.name;
            match ready.into_iter().find(|&i| self.unload_if_idle(i)) {
                Some(i) => eprintln!(
                    "unloaded model {:?}, the least recently used idle one, to load {name:?} \
                     (--models-max {max})",
                    self.entries[i].spec.name
                ),
                None => return Err(ApiError::models_busy(name, max)),
            }
        }
    }

    /// Unloads model `index` if it is ready and serves nobody: no request waits for it or
    /// holds it, and its slots run and queue nothing. Its slot thread then ends (its job
    /// channel closes) and drops the contexts; the last of them frees the model.
    fn unload_if_idle(&self, index: usize) -> bool {
        let entry = &self.entries[index];
        let mut unloaded = None;
        entry.state.send_if_modified(|s| {
            let idle = matches!(s, State::Ready(l) if Arc::strong_count(l) == 1 && l.slots.idle())
                && entry.waiters.load(Ordering::SeqCst) == 0;
            if idle {
                unloaded = Some(std::mem::replace(s, State::Unloaded));
            }
            idle
        });
        unloaded.is_some()
    }
}
