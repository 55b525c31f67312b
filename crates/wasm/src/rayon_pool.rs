//! The engine's thread pool on rayon's global pool, which wasm-bindgen-rayon's `initThreadPool`
//! fills with Web Workers sharing the module's memory.

use engine::ThreadPool;
use rayon::prelude::*;

pub struct RayonGlobalPool;

impl ThreadPool for RayonGlobalPool {
    fn n_threads(&self) -> usize {
        rayon::current_num_threads()
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        (0..n_tasks).into_par_iter().for_each(task);
    }
}
