//! A model ready to serve, and how one is built from the host's model and contexts.

use std::sync::{Arc, Mutex};

use tessera_core::model::Model;
use tessera_runtime::constraint::GrammarEnv;
use tessera_tokenizer::chat_template::ChatTemplate;
use tokio::sync::mpsc::WeakSender;

use super::{ModelHost, ModelSpec};
use crate::error::ApiError;
use crate::slots::{self, Event, Job, SlotsHandle};

/// A model ready to serve.
pub struct Loaded {
    pub name: String,
    pub model: Arc<Model>,
    pub template: Option<ChatTemplate>,
    pub slots: Slots,
    /// Positions of each slot's context.
    pub n_ctx_slot: usize,
    /// Positions a context shift keeps, when the model is served with one.
    pub shift_keep: Option<usize>,
}

/// A model's slots, and which requests they still hold. The registry unloads only a model
/// that serves nobody; a streamed answer outlives the request handler (and its `Arc<Loaded>`),
/// so the slots' own hold on each request's event sender is what says it still runs.
pub struct Slots {
    handle: SlotsHandle,
    /// A weak sender per request handed over: its job holds the only strong one until it
    /// ends (done, failed, or cancelled because its client left).
    jobs: Mutex<Vec<WeakSender<Event>>>,
}

impl Slots {
    /// Queues `job`; a 503 when the queue is full or the slot thread has stopped.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        let weak = job.events.downgrade();
        self.handle.submit(job)?;
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.retain(|w| w.strong_count() > 0);
        jobs.push(weak);
        Ok(())
    }

    /// Whether no request waits or runs in these slots.
    pub fn idle(&self) -> bool {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.iter().all(|w| w.strong_count() == 0)
    }
}

/// Loads `spec` with `host` and starts its slots; `Err` is for the server log only (it may
/// name files and carry the host's own messages).
pub(super) fn load(host: &dyn ModelHost, spec: &ModelSpec, queue: usize) -> Result<Loaded, String> {
    let model = host.load(spec)?;
    // The grammar engine's view of the vocabulary takes a fraction of a second to build (a
    // second for 262k tokens): built beside the first requests, not in a structured one's way.
    let warm = model.clone();
    std::thread::spawn(move || drop(GrammarEnv::for_model(&warm)));
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
        _ => host.context(spec, &model, n_ctx_slot, parallel).ok(),
    };
    let contexts = match shared {
        Some(ctx) => vec![ctx],
        None => (0..parallel)
            .map(|_| host.context(spec, &model, n_ctx_slot, 1))
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(Loaded {
        name: spec.name.clone(),
        shift_keep: spec
            .context_shift
            .then(|| model.tokenizer().add_bos() as usize),
        model,
        template,
        slots: Slots {
            handle: slots::start(contexts, queue),
            jobs: Mutex::new(Vec::new()),
        },
        n_ctx_slot,
    })
}
