//! A [`ThreadPool`]: the calling thread plus `n - 1` persistent workers that spin briefly
//! between jobs, the way ggml's CPU threadpool does. The host starts the workers on its own
//! threads (native: `std::thread`; the browser's threaded build: wasm-bindgen-rayon's Web
//! Workers), so the engine itself still never spawns a thread.
//!
//! Why not rayon: the engine calls `run` once per graph op (hundreds per token). With rayon the
//! caller hands each op to the pool and sleeps until it is done, so every op pays a cross-thread
//! wake-up on both sides, often more than the op itself during decode (in the browser, where a
//! wake-up is an `Atomics.notify` to another Web Worker, two threads decoded no faster than
//! one). Here the caller works on the op's tasks too, and the workers, still spinning from the
//! previous op, pick up the rest at once; they only park after a quiet spell (`idle_spins`
//! polls: a count, not a time, because wasm32 has no clock in std).
//!
//! Parking blocks on a `Condvar`, so the workers must run where blocking is allowed (not on a
//! browser page's main thread); the caller of `run` only ever spins.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tessera_core::error::EngineError;
use tessera_core::threading::ThreadPool;

/// A worker's body, which the host runs on a thread of its own until it returns.
pub type WorkerBody = Box<dyn FnOnce() + Send + 'static>;
/// Waits for a worker's body to return (natively `JoinHandle::join`); `None` where the host's
/// threads cannot be joined (the browser's): dropping the pool still stops every worker.
pub type WorkerJoin = Box<dyn FnOnce() + Send + Sync + 'static>;

/// The current job. `task` points at the closure passed to `run`, which outlives every call
/// made through it (see `Shared::claim`).
#[derive(Clone, Copy)]
struct Job {
    task: *const (dyn Fn(usize) + Sync),
    n_tasks: usize,
    /// The generation this job belongs to. A worker that saw generation g can read the job of
    /// g + 1 (published while g's word is still in place); it must not claim with it.
    gen: u64,
}

// SAFETY: the pointee is `Sync`; the pointer is only dereferenced while `run` is still waiting.
unsafe impl Send for Job {}

struct Shared {
    /// High 32 bits: job generation; low 32 bits: the next task index to claim.
    word: AtomicU64,
    job: Mutex<Job>,
    /// Tasks of the current job that have finished.
    done: AtomicUsize,
    sleeping: AtomicUsize,
    wake_lock: Mutex<()>,
    wake: Condvar,
    stop: AtomicBool,
}

impl Shared {
    /// Claims and runs tasks of generation `gen` until none is left. A claim succeeds only while
    /// the word still carries `gen`, and a new job is published only after every task of the
    /// previous one finished, so `job` (read after seeing `gen`) is the one the claims belong to
    /// and its closure is alive for every call made here.
    fn work(&self, gen: u64, job: Job) {
        if job.gen != gen {
            return;
        }
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            if cur >> 32 != gen || (cur & 0xffff_ffff) as usize >= job.n_tasks {
                return;
            }
            match self
                .word
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // SAFETY: see above: the claim proves `run` has not returned for this job.
                    let task = unsafe { &*job.task };
                    task((cur & 0xffff_ffff) as usize);
                    self.done.fetch_add(1, Ordering::Release);
                    cur = self.word.load(Ordering::Acquire);
                }
                Err(now) => cur = now,
            }
        }
    }
}

thread_local! {
    /// Set while this thread runs a task of some pool: a nested `run` then runs inline.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

pub struct SpinPool {
    shared: Arc<Shared>,
    /// One entry per worker started (the joins of hosts that have them).
    workers: Vec<Option<WorkerJoin>>,
    /// Serializes `run` calls from different threads (one job at a time).
    run_lock: Mutex<()>,
    n_threads: usize,
}

impl SpinPool {
    /// A pool of `n_threads` (the caller of `run` counts as one): `spawn(i, body)` must run
    /// `body` on a new thread for worker `i` (1 ..= n_threads - 1). An idle worker polls
    /// `idle_spins` times for the next job before it parks.
    pub fn new(
        n_threads: usize,
        idle_spins: u32,
        mut spawn: impl FnMut(usize, WorkerBody) -> Result<Option<WorkerJoin>, EngineError>,
    ) -> Result<SpinPool, EngineError> {
        let n_threads = n_threads.max(1);
        let noop: &(dyn Fn(usize) + Sync) = &|_| {};
        let shared = Arc::new(Shared {
            word: AtomicU64::new(0),
            job: Mutex::new(Job {
                task: noop as *const _,
                n_tasks: 0,
                gen: 0,
            }),
            done: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            wake_lock: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let mut pool = SpinPool {
            shared,
            workers: Vec::new(),
            run_lock: Mutex::new(()),
            n_threads: 1,
        };
        for i in 1..n_threads {
            let s = pool.shared.clone();
            // On an error, dropping `pool` stops the workers already started.
            let join = spawn(i, Box::new(move || worker_loop(&s, idle_spins)))?;
            pool.workers.push(join);
            pool.n_threads += 1;
        }
        Ok(pool)
    }

    /// A pool of `n_threads` (the caller included) whose workers are named std threads, as a
    /// native host makes it. Where the platform has no threads of its own (wasm32, whose host
    /// starts Web Workers instead) this is an [`EngineError::Threads`].
    pub fn on_std_threads(n_threads: usize) -> Result<SpinPool, EngineError> {
        SpinPool::new(n_threads, NATIVE_IDLE_SPINS, |i, body| {
            let handle = std::thread::Builder::new()
                .name(format!("tessera-worker-{i}"))
                .spawn(body)
                .map_err(|e| EngineError::Threads(e.to_string()))?;
            Ok(Some(Box::new(move || {
                let _ = handle.join();
            })))
        })
    }
}

/// Polls of an idle native worker before it parks: a `pause` per poll and a `yield_now` every
/// 32nd, on the order of a few hundred microseconds: long enough to bridge the gap between two
/// ops of one decode step, short enough that an idle pool soon stops using the CPU.
const NATIVE_IDLE_SPINS: u32 = 4096;

/// The threads this machine runs at once (llama.cpp's default thread count), 1 where unknown.
pub fn available_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn worker_loop(s: &Shared, idle_spins: u32) {
    IN_TASK.with(|f| f.set(true));
    let mut seen = 0u64;
    loop {
        // Spin for a new generation, then park.
        let mut spins = 0u32;
        let gen = loop {
            let g = s.word.load(Ordering::Acquire) >> 32;
            if g != seen || s.stop.load(Ordering::Relaxed) {
                break g;
            }
            spins += 1;
            if spins.is_multiple_of(32) {
                // Give the core away when other processes want it (shared machines).
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            if spins >= idle_spins {
                let mut guard = s.wake_lock.lock().unwrap_or_else(|e| e.into_inner());
                s.sleeping.fetch_add(1, Ordering::SeqCst);
                while s.word.load(Ordering::SeqCst) >> 32 == seen && !s.stop.load(Ordering::SeqCst)
                {
                    guard = s.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
                }
                s.sleeping.fetch_sub(1, Ordering::SeqCst);
                break s.word.load(Ordering::Acquire) >> 32;
            }
        };
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        seen = gen;
        let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
        s.work(gen, job);
    }
}

impl ThreadPool for SpinPool {
    fn n_threads(&self) -> usize {
        self.n_threads
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        if n_tasks == 0 {
            return;
        }
        if n_tasks == 1 || self.workers.is_empty() || IN_TASK.with(|f| f.get()) {
            // No hand-off: the caller runs everything (also for nested calls from a task).
            (0..n_tasks).for_each(task);
            return;
        }
        assert!((n_tasks as u64) < 1 << 32, "too many tasks for one run");
        let _one_job = self.run_lock.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY (lifetime erasure): `task` is only called by claims of this generation, and
        // this function returns only after all of them finished (`done == n_tasks` below).
        let task_ptr: *const (dyn Fn(usize) + Sync + 'static) =
            unsafe { std::mem::transmute(task) };
        let gen = ((s.word.load(Ordering::Relaxed) >> 32) + 1) & 0xffff_ffff;
        let job = Job {
            task: task_ptr,
            n_tasks,
            gen,
        };
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = job;
        s.done.store(0, Ordering::Relaxed);
        s.word.store(gen << 32, Ordering::SeqCst);
        if s.sleeping.load(Ordering::SeqCst) > 0 {
            let _g = s.wake_lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        IN_TASK.with(|f| f.set(true));
        s.work(gen, job);
        IN_TASK.with(|f| f.set(false));
        let mut spins = 0u32;
        while s.done.load(Ordering::Acquire) < n_tasks {
            spins += 1;
            if !spins.is_multiple_of(32) {
                std::hint::spin_loop();
            } else {
                // A worker holding a task was descheduled (busy machine): let it run.
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for SpinPool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _g = self
                .shared
                .wake_lock
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for join in self.workers.drain(..).flatten() {
            join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn std_pool(n_threads: usize) -> SpinPool {
        SpinPool::on_std_threads(n_threads).unwrap()
    }

    #[test]
    fn runs_every_task_once() {
        for threads in [1, 2, 3] {
            let pool = std_pool(threads);
            assert_eq!(pool.n_threads(), threads);
            for round in 0..2000 {
                for n in [0, 1, 2, 7, 100] {
                    let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                    pool.run(n, &|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    });
                    assert!(
                        hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                        "threads {threads} round {round} n {n}"
                    );
                }
                if round % 500 == 100 {
                    // Let the workers park, then check they wake up.
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }

    #[test]
    fn nested_and_concurrent_runs_complete() {
        let pool = Arc::new(std_pool(2));
        let total = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (pool, total) = (pool.clone(), total.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        pool.run(4, &|_| {
                            pool.run(3, &|_| {
                                total.fetch_add(1, Ordering::Relaxed);
                            });
                        });
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
        assert_eq!(total.load(Ordering::Relaxed), 2 * 50 * 4 * 3);
    }
}
