//! The thread pool the engine runs its kernels on, injected by the host.
//!
//! The engine itself never spawns threads (it also runs in wasm, where threads come from the
//! page): the native host supplies a persistent pool (rayon), the browser a wasm-bindgen-rayon
//! one, and [`SequentialPool`] runs everything on the calling thread.

/// Runs `n_tasks` independent tasks, `task(0) .. task(n_tasks - 1)`, and returns when all are
/// done. Tasks may run in any order and on any thread; the engine splits work so that results do
/// not depend on which thread runs what.
pub trait ThreadPool: Send + Sync {
    /// How many threads run tasks at once (used to decide how finely to split work).
    fn n_threads(&self) -> usize;
    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync));
}

/// Runs every task on the calling thread, in order.
#[derive(Clone, Copy, Debug, Default)]
pub struct SequentialPool;

impl ThreadPool for SequentialPool {
    fn n_threads(&self) -> usize {
        1
    }
    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        for i in 0..n_tasks {
            task(i);
        }
    }
}
