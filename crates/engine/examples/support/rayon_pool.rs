//! The examples' and the model tests' thread pool: tasks on the global rayon pool (the CLI
//! has its own, tuned pool).

use engine::ThreadPool;

/// Reports `self.0` threads (the size the example built rayon's global pool with).
pub struct RayonPool(pub usize);

impl ThreadPool for RayonPool {
    fn n_threads(&self) -> usize {
        self.0
    }
    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        use rayon::prelude::*;
        (0..n_tasks).into_par_iter().for_each(task);
    }
}
