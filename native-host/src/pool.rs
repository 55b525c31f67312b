//! The engine's thread pool on native: a persistent rayon pool of `-t` threads.

use engine::ThreadPool;
use rayon::prelude::*;

pub struct RayonPool {
    pool: rayon::ThreadPool,
}

impl RayonPool {
    pub fn new(n_threads: usize) -> anyhow::Result<RayonPool> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n_threads.max(1))
            .thread_name(|i| format!("tessera-worker-{i}"))
            .build()?;
        Ok(RayonPool { pool })
    }
}

impl ThreadPool for RayonPool {
    fn n_threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        match n_tasks {
            0 => {}
            // No hand-off for a single task: the caller runs it.
            1 => task(0),
            _ => self
                .pool
                .install(|| (0..n_tasks).into_par_iter().with_max_len(1).for_each(task)),
        }
    }
}

/// llama.cpp's default: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn runs_every_task_once() {
        let pool = RayonPool::new(2).unwrap();
        assert_eq!(pool.n_threads(), 2);
        for n in [0, 1, 2, 7, 100] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            pool.run(n, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }
}
