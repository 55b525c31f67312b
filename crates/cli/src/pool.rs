//! The CLI's thread pool: the CPU backend's [`SpinPool`] with its workers on std threads.

use tessera_backend_cpu::SpinPool;
use tessera_core::EngineError;

/// Polls of an idle worker before it parks: a `pause` per poll and a `yield_now` every 32nd,
/// on the order of a few hundred microseconds: long enough to bridge the gap between two ops of
/// one decode step, short enough that an idle pool soon stops using the CPU.
const IDLE_SPINS: u32 = 4096;

/// A pool of `n_threads` (the calling thread included).
pub fn spin_pool(n_threads: usize) -> anyhow::Result<SpinPool> {
    Ok(SpinPool::new(n_threads, IDLE_SPINS, |i, body| {
        let handle = std::thread::Builder::new()
            .name(format!("tessera-worker-{i}"))
            .spawn(body)
            .map_err(|e| EngineError::Threads(e.to_string()))?;
        Ok(Some(Box::new(move || {
            let _ = handle.join();
        })))
    })?)
}

/// llama.cpp's default: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
