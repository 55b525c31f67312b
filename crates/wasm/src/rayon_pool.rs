//! The threaded build's thread pool: the engine's [`SpinPool`], its workers started on the Web
//! Workers that wasm-bindgen-rayon's `initThreadPool(n)` made (one long-running rayon job
//! each). The engine's own worker thread, which calls into the engine, is the pool's first
//! thread, so `initThreadPool(threads - 1)` gives `threads` in all.
//!
//! One pool per module instance, made on the first load: its workers park when idle, and
//! every later engine of the page's worker shares them.

use std::sync::{Arc, Mutex};

use tessera_backend_cpu::SpinPool;
use tessera_core::ThreadPool;

/// Polls of an idle worker before it parks. wasm has no `pause` instruction, so a poll is one
/// atomic load: this is a few hundred microseconds, the gap between decode steps.
const IDLE_SPINS: u32 = 1 << 18;

static POOL: Mutex<Option<Arc<SpinPool>>> = Mutex::new(None);

/// The shared pool, started on first use with one worker per rayon thread.
pub fn shared_pool() -> Result<Arc<dyn ThreadPool>, tessera_core::EngineError> {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pool.as_ref() {
        return Ok(p.clone());
    }
    let workers = rayon::current_num_threads();
    let p = Arc::new(SpinPool::new(workers + 1, IDLE_SPINS, |_, body| {
        rayon::spawn(body);
        Ok(None) // a rayon job cannot be joined; dropping the pool stops it
    })?);
    *pool = Some(p.clone());
    Ok(p)
}
