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
//! least recently used one, but only a slot whose cache the same caller filled (a page's
//! prompt is never reused for, nor its length revealed to, another origin) unless the server
//! shares caches. Requests beyond the free slots wait in a bounded queue: past it, 503.
//!
//! Each request's events go through a bounded channel: a client that stops reading fills it,
//! and its generation pauses (its slot still held) until the reader drains it or the stream's
//! write timeout drops the request ([`crate::stream`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_core::context::Context;
use tessera_runtime::generate::GenerateError;
use tessera_runtime::generate::{Clock, GenerateParams, GenerateStats};
use tessera_runtime::generation::{
    step_together, Generation, GenerationOptions, SpecReport, Step, PREFILL_STEP,
};
use tessera_runtime::speculative::{SpecParams, SpeculatorChain};
use tokio::sync::mpsc::Sender;

use crate::error::ApiError;

/// Events a request's channel holds before its generation pauses (a step sends at most two).
pub const EVENT_BUFFER: usize = 32;

/// Seconds a client refused for a full queue is told to wait (`Retry-After`).
const RETRY_AFTER_S: u64 = 1;

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
    /// Who asked (their `Origin`, empty for a local process; one value for all callers when
    /// the server shares prefix caches): a slot's cache is reused only for its own caller.
    pub caller: String,
    /// Bounded ([`EVENT_BUFFER`]).
    pub events: Sender<Event>,
}

/// Where requests are handed to a model's slot thread.
#[derive(Clone)]
pub struct SlotsHandle {
    jobs: SyncSender<Job>,
    /// Requests submitted and not yet started (or dropped), against `queue`.
    waiting: Arc<AtomicUsize>,
    queue: usize,
}

impl SlotsHandle {
    /// Queues `job`; a 503 with `Retry-After` when `queue` requests already wait, or when the
    /// slot thread has stopped.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        let claimed = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.queue).then_some(n + 1)
            });
        if claimed.is_err() {
            return Err(busy());
        }
        self.jobs.try_send(job).map_err(|e| {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            match e {
                TrySendError::Full(_) => busy(),
                TrySendError::Disconnected(_) => {
                    ApiError::internal("the model's slots have stopped")
                }
            }
        })
    }
}

fn busy() -> ApiError {
    ApiError::unavailable("the server is busy: try again later").with_retry_after(RETRY_AFTER_S)
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
    /// The caller whose tokens the cache holds.
    owner: String,
}

struct Running {
    generation: Generation,
    events: Sender<Event>,
}

impl Running {
    /// Whether the client has room for what one step sends.
    fn can_take_a_step(&self) -> bool {
        self.events.capacity() >= 2
    }
}

/// Starts the slot thread over `contexts`, one slot per sequence of each (a context of several
/// sequences steps them together); `queue` requests may wait for a slot.
pub fn start(contexts: Vec<Context>, queue: usize) -> SlotsHandle {
    let (jobs, inbox) = mpsc::sync_channel(queue.max(1));
    let waiting = Arc::new(AtomicUsize::new(0));
    let slots: Vec<Slot> = contexts
        .iter()
        .enumerate()
        .flat_map(|(ctx, c)| (0..c.n_seq()).map(move |seq| (ctx, seq)))
        .map(|(ctx, seq)| Slot {
            ctx,
            seq,
            running: None,
            last_used: 0,
            owner: String::new(),
        })
        .collect();
    let count = waiting.clone();
    std::thread::Builder::new()
        .name("tessera-slots".into())
        .spawn(move || run(contexts, slots, inbox, &count))
        .expect("cannot start the slots thread");
    SlotsHandle {
        jobs,
        waiting,
        queue,
    }
}

fn run(
    mut contexts: Vec<Context>,
    mut slots: Vec<Slot>,
    inbox: Receiver<Job>,
    count: &AtomicUsize,
) {
    let clock = InstantClock(Instant::now());
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut round = 0u64;
    loop {
        round += 1;
        let steppable = slots
            .iter()
            .any(|s| s.running.as_ref().is_some_and(Running::can_take_a_step));
        // Nothing to step (idle, or every client is behind on reading): sleep until a request
        // comes, waking now and then to drop cancelled waiters and resume drained clients.
        if !steppable && waiting.is_empty() {
            let nap = match slots.iter().any(|s| s.running.is_some()) {
                true => Duration::from_millis(5),
                false => Duration::from_millis(500),
            };
            match inbox.recv_timeout(nap) {
                Ok(job) => waiting.push_back(job),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        while let Ok(job) = inbox.try_recv() {
            waiting.push_back(job);
        }
        let before = waiting.len();
        waiting.retain(|job| !job.events.is_closed());
        count.fetch_sub(before - waiting.len(), Ordering::AcqRel);
        while let Some(i) = best_free_slot(&contexts, &slots, waiting.front()) {
            let job = waiting.pop_front().expect("a waiting job");
            count.fetch_sub(1, Ordering::AcqRel);
            let ctx = &mut contexts[slots[i].ctx];
            start_job(ctx, &mut slots[i], i, job, round, &clock);
        }
        for (c, ctx) in contexts.iter_mut().enumerate() {
            step_context(ctx, c, &mut slots, &clock);
        }
    }
}

/// The free slot for `job`: the longest prefix shared with a cache its caller filled, else
/// the least recently used.
fn best_free_slot(contexts: &[Context], slots: &[Slot], job: Option<&Job>) -> Option<usize> {
    let job = job?;
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.running.is_none())
        .max_by_key(|(_, s)| {
            let shared = match s.owner == job.caller {
                true => contexts[s.ctx]
                    .seq_tokens(s.seq)
                    .iter()
                    .zip(&job.prompt)
                    .take_while(|(a, b)| a == b)
                    .count(),
                false => 0,
            };
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
                .try_send(Event::Failed(ApiError::invalid(e.to_string())));
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
        .and_then(|()| {
            // Another caller's tokens: nothing of them is reused (nor timed as reused).
            if slot.owner != job.caller {
                ctx.clear();
                slot.owner = job.caller.clone();
            }
            Generation::start(ctx, job.prompt, job.params, options, clock)
        });
    match started {
        Ok(generation) => {
            let n_reused = ctx.n_past();
            let _ = job.events.try_send(Event::Started {
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
                .try_send(Event::Failed(ApiError::invalid(e.to_string())));
        }
    }
}

/// One round of context `c`'s slots: clients that went away are cancelled (freeing their
/// slots), and the running generations whose clients have room step together.
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
        running.can_take_a_step()
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
                let _ = running.events.try_send(Event::Text(text));
            }
            false
        }
        Ok(Step::Done {
            text,
            stats,
            speculative,
        }) => {
            if !text.is_empty() {
                let _ = running.events.try_send(Event::Text(text));
            }
            let _ = running.events.try_send(Event::Done(stats, speculative));
            true
        }
        Err(e) => {
            eprintln!("generation failed: {e}");
            let _ = running.events.try_send(Event::Failed(ApiError::internal(
                "the generation failed (see the server log)",
            )));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that reads nothing fills its event buffer and its generation waits there (the
    /// server's memory flat); once it reads, the answer goes on to its end.
    #[test]
    fn a_client_behind_on_reading_pauses_its_generation() {
        let model = tessera_testkit::load_model(tessera_testkit::SMOLLM2);
        let ctx = tessera_testkit::multi_context(&model, 512, 512, 2, 1);
        let slots = start(vec![ctx], 4);
        let (events, mut rx) = tokio::sync::mpsc::channel(EVENT_BUFFER);
        let n = 200;
        slots
            .submit(Job {
                prompt: model.tokenizer().encode("Once upon a time", true, false),
                params: GenerateParams {
                    max_tokens: Some(n),
                    ignore_eos: true,
                    ..GenerateParams::default()
                },
                spec: None,
                shift_keep: None,
                caller: String::new(),
                events,
            })
            .unwrap();
        // Long enough for all 200 tokens had it not paused.
        std::thread::sleep(Duration::from_secs(3));
        let mut buffered = 0;
        while let Ok(event) = rx.try_recv() {
            assert!(
                !matches!(event, Event::Done(..)),
                "it ran to its end unread"
            );
            buffered += 1;
        }
        assert!(buffered <= EVENT_BUFFER, "{buffered} events buffered");
        loop {
            match rx.blocking_recv() {
                Some(Event::Done(stats, _)) => break assert_eq!(stats.n_generated, n),
                Some(Event::Failed(e)) => panic!("{e:?}"),
                Some(_) => {}
                None => panic!("the slots dropped the request"),
            }
        }
    }
}
