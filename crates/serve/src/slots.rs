//! The slots of one model: a thread that owns the model's contexts and steps every running
//! generation, one [`Step`] each per round, so a new request starts at the next round and a
//! long prompt is decoded in slices between the other slots' tokens. A request whose client
//! went away (its event receiver dropped) is cancelled at its next round, which frees its slot.
//!
//! Each slot is one sequence (its own KV cache) of a context. Where the backend batches
//! sequences (the CPU) all slots are sequences of one context and a round is one forward pass
//! ([`step_together`]: every running slot's decode token and at most one prompt slice, up to
//! `n_batch` tokens): the weights are read once per round, not once per slot, and each
//! request gets exactly the tokens it gets alone. Otherwise (WebGPU) each slot has a context of
//! its own and the slots step one after another.
//!
//! A request goes to the free slot whose KV cache shares the longest prefix with its prompt (a
//! conversation's next turn re-sends the history; only the new part is decoded), else to the
//! least recently used one. Requests beyond the free slots wait in a bounded queue.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use tessera_core::context::Context;
use tessera_runtime::generate::GenerateError;
use tessera_runtime::generate::{Clock, GenerateParams, GenerateStats};
use tessera_runtime::generation::{
    step_together, Generation, GenerationOptions, SpecReport, Step, PREFILL_STEP,
};
use tessera_runtime::speculative::{SpecParams, SpeculatorChain};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::ApiError;

/// What a request hears from its slot, in order: text pieces, then one `Done` or `Failed`.
#[derive(Debug)]
pub enum Event {
    /// Which slot runs the request (first event).
    Started {
        slot: usize,
        n_reused: usize,
    },
    Text(String),
    /// The statistics, and the speculative decoding's when the request asked for it.
    Done(GenerateStats, Option<SpecReport>),
    Failed(ApiError),
}

/// One generation asked of the slots.
pub struct Job {
    pub prompt: Vec<u32>,
    pub params: GenerateParams,
    /// Draftless speculative decoding.
    pub spec: Option<SpecParams>,
    /// Context shift: the positions it keeps.
    pub shift_keep: Option<usize>,
    pub events: UnboundedSender<Event>,
}

/// Where requests are handed to a model's slot thread.
#[derive(Clone)]
pub struct SlotsHandle {
    jobs: SyncSender<Job>,
}

impl SlotsHandle {
    /// Queues `job`; a 503 when the queue is full or the slot thread has stopped.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        self.jobs.try_send(job).map_err(|e| match e {
            TrySendError::Full(_) => ApiError::unavailable("the server is busy: try again later"),
            TrySendError::Disconnected(_) => ApiError::internal("the model's slots have stopped"),
        })
    }
}

/// Seconds since the slots started (the runtime's timings need a clock).
struct InstantClock(Instant);

impl Clock for InstantClock {
    fn now_s(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

struct Slot {
    /// The context, and its sequence, that hold this slot's KV cache.
    ctx: usize,
    seq: usize,
    running: Option<Running>,
    /// Round of the last request, to pick the least recently used free slot.
    last_used: u64,
}

struct Running {
    generation: Generation,
    events: UnboundedSender<Event>,
}

/// Starts the slot thread over `contexts`, one slot per sequence of each (a context of several
/// sequences steps them together); `queue` requests may wait for a slot.
pub fn start(contexts: Vec<Context>, queue: usize) -> SlotsHandle {
    let (jobs, inbox) = mpsc::sync_channel(queue);
    let slots: Vec<Slot> = contexts
        .iter()
        .enumerate()
        .flat_map(|(ctx, c)| (0..c.n_seq()).map(move |seq| (ctx, seq)))
        .map(|(ctx, seq)| Slot {
            ctx,
            seq,
            running: None,
            last_used: 0,
        })
        .collect();
    std::thread::Builder::new()
        .name("tessera-slots".into())
        .spawn(move || run(contexts, slots, inbox))
        .expect("cannot start the slots thread");
    SlotsHandle { jobs }
}

fn run(mut contexts: Vec<Context>, mut slots: Vec<Slot>, inbox: Receiver<Job>) {
    let clock = InstantClock(Instant::now());
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut round = 0u64;
    loop {
        round += 1;
        let busy = slots.iter().any(|s| s.running.is_some());
        // Idle: sleep until a request comes (waking now and then to drop cancelled waiters).
        if !busy && waiting.is_empty() {
            match inbox.recv_timeout(Duration::from_millis(500)) {
                Ok(job) => waiting.push_back(job),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        while let Ok(job) = inbox.try_recv() {
            waiting.push_back(job);
        }
        waiting.retain(|job| !job.events.is_closed());
        while let Some(i) =
            best_free_slot(&contexts, &slots, waiting.front().map(|j| &j.prompt[..]))
        {
            let job = waiting.pop_front().expect("a waiting job");
            let ctx = &mut contexts[slots[i].ctx];
            start_job(ctx, &mut slots[i], i, job, round, &clock);
        }
        for (c, ctx) in contexts.iter_mut().enumerate() {
            step_context(ctx, c, &mut slots, &clock);
        }
    }
}

/// The free slot for `prompt`: the longest shared prefix, else the least recently used.
fn best_free_slot(contexts: &[Context], slots: &[Slot], prompt: Option<&[u32]>) -> Option<usize> {
    let prompt = prompt?;
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.running.is_none())
        .max_by_key(|(_, s)| {
            let shared = contexts[s.ctx]
                .seq_tokens(s.seq)
                .iter()
                .zip(prompt)
                .take_while(|(a, b)| a == b)
                .count();
            (shared, std::cmp::Reverse(s.last_used))
        })
        .map(|(i, _)| i)
}

fn start_job(
    ctx: &mut Context,
    slot: &mut Slot,
    index: usize,
    job: Job,
    round: u64,
    clock: &InstantClock,
) {
    slot.last_used = round;
    let speculator = match job
        .spec
        .as_ref()
        .map(|p| SpeculatorChain::from_params(p, None, None, None))
    {
        None => None,
        Some(Ok(chain)) => Some(chain),
        Some(Err(e)) => {
            let _ = job
                .events
                .send(Event::Failed(ApiError::invalid(e.to_string())));
            return;
        }
    };
    let options = GenerationOptions {
        prefill_step: PREFILL_STEP,
        speculator,
        context_shift: job.shift_keep,
        ..GenerationOptions::default()
    };
    let started = ctx
        .select(slot.seq)
        .map_err(GenerateError::from)
        .and_then(|()| Generation::start(ctx, job.prompt, job.params, options, clock));
    match started {
        Ok(generation) => {
            let n_reused = ctx.n_past();
            let _ = job.events.send(Event::Started {
                slot: index,
                n_reused,
            });
            slot.running = Some(Running {
                generation,
                events: job.events,
            });
        }
        Err(e) => {
            let _ = job
                .events
                .send(Event::Failed(ApiError::invalid(e.to_string())));
        }
    }
}

/// One round of context `c`'s slots: clients that went away are cancelled (freeing their
/// slots), and the running generations step together.
fn step_context(ctx: &mut Context, c: usize, slots: &mut [Slot], clock: &InstantClock) {
    let mut mine: Vec<&mut Slot> = slots
        .iter_mut()
        .filter(|s| s.ctx == c && s.running.is_some())
        .collect();
    mine.retain_mut(|slot| {
        let running = slot.running.as_mut().expect("running slots only");
        if running.events.is_closed() {
            running.generation.cancel(clock);
            slot.running = None;
            return false;
        }
        true
    });
    let mut generations: Vec<&mut Generation> = mine
        .iter_mut()
        .map(|s| &mut s.running.as_mut().expect("running slots only").generation)
        .collect();
    let steps = step_together(ctx, &mut generations, clock);
    drop(generations);
    for (slot, step) in mine.into_iter().zip(steps) {
        if let Some(step) = step {
            report_step(ctx, slot, step);
        }
    }
}

/// Sends what a slot's step produced; ends the request when done or failed.
fn report_step(ctx: &mut Context, slot: &mut Slot, step: Result<Step, GenerateError>) {
    let running = slot.running.as_mut().expect("a stepped slot runs");
    let finished = match step {
        Ok(Step::Pending | Step::Prefilled { .. }) => false,
        Ok(Step::Tokens { text, .. }) => {
            if !text.is_empty() {
                let _ = running.events.send(Event::Text(text));
            }
            false
        }
        Ok(Step::Done {
            text,
            stats,
            speculative,
        }) => {
            if !text.is_empty() {
                let _ = running.events.send(Event::Text(text));
            }
            let _ = running.events.send(Event::Done(stats, speculative));
            true
        }
        Err(e) => {
            let _ = running
                .events
                .send(Event::Failed(ApiError::internal(e.to_string())));
            // The KV cache may hold a half-decoded step: start the next request afresh.
            if ctx.select(slot.seq).is_ok() {
                ctx.clear();
            }
            true
        }
    };
    if finished {
        slot.running = None;
    }
}
