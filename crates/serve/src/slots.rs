//! The slots of one model: a thread that owns the model's contexts (one per slot, each with its
//! own KV cache) and steps every running generation in turn, one [`Step`] each per round, so a
//! new request starts at the next round and a long prompt is decoded in slices between the
//! other slots' tokens. A request whose client went away (its event receiver dropped) is
//! cancelled at its next step, which frees its slot.
//!
//! A request goes to the free slot whose KV cache shares the longest prefix with its prompt (a
//! conversation's next turn re-sends the history; only the new part is decoded), else to the
//! least recently used one. Requests beyond the free slots wait in a bounded queue.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use tessera_core::context::Context;
use tessera_runtime::generate::{Clock, GenerateParams, GenerateStats};
use tessera_runtime::generation::{Generation, GenerationOptions, SpecReport, Step, PREFILL_STEP};
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
    ctx: Context,
    running: Option<Running>,
    /// Round of the last request, to pick the least recently used free slot.
    last_used: u64,
}

struct Running {
    generation: Generation,
    events: UnboundedSender<Event>,
}

/// Starts the slot thread over `contexts` (one per slot); `queue` requests may wait for a slot.
pub fn start(contexts: Vec<Context>, queue: usize) -> SlotsHandle {
    let (jobs, inbox) = mpsc::sync_channel(queue);
    let slots: Vec<Slot> = contexts
        .into_iter()
        .map(|ctx| Slot {
            ctx,
            running: None,
            last_used: 0,
        })
        .collect();
    std::thread::Builder::new()
        .name("tessera-slots".into())
        .spawn(move || run(slots, inbox))
        .expect("cannot start the slots thread");
    SlotsHandle { jobs }
}

fn run(mut slots: Vec<Slot>, inbox: Receiver<Job>) {
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
        while let Some(i) = best_free_slot(&slots, waiting.front().map(|j| &j.prompt[..])) {
            let job = waiting.pop_front().expect("a waiting job");
            start_job(&mut slots[i], i, job, round, &clock);
        }
        for slot in slots.iter_mut() {
            step_slot(slot, &clock);
        }
    }
}

/// The free slot for `prompt`: the longest shared prefix, else the least recently used.
fn best_free_slot(slots: &[Slot], prompt: Option<&[u32]>) -> Option<usize> {
    let prompt = prompt?;
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.running.is_none())
        .max_by_key(|(_, s)| {
            let shared = s
                .ctx
                .tokens()
                .iter()
                .zip(prompt)
                .take_while(|(a, b)| a == b)
                .count();
            (shared, std::cmp::Reverse(s.last_used))
        })
        .map(|(i, _)| i)
}

fn start_job(slot: &mut Slot, index: usize, job: Job, round: u64, clock: &InstantClock) {
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
        ..GenerationOptions::default()
    };
    match Generation::start(&mut slot.ctx, job.prompt, job.params, options, clock) {
        Ok(generation) => {
            let n_reused = slot.ctx.n_past();
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

/// One step of the slot's generation; ends it when done, failed or abandoned by its client.
fn step_slot(slot: &mut Slot, clock: &InstantClock) {
    let Some(running) = slot.running.as_mut() else {
        return;
    };
    if running.events.is_closed() {
        running.generation.cancel(clock);
        slot.running = None;
        return;
    }
    let finished = match running.generation.step(&mut slot.ctx, clock) {
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
            slot.ctx.clear();
            true
        }
    };
    if finished {
        slot.running = None;
    }
}
