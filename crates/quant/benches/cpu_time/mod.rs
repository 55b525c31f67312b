//! CPU time of the calling thread (Linux schedstat) for the `*_cpu_time` benches: unlike wall
//! time, it holds on a loaded machine.

/// Nanoseconds of CPU this thread has used.
pub fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Runs `f` once to warm the caches, then again until `budget_ns` of this thread's CPU time
/// has passed (schedstat advances in scheduler ticks, so a measurement must span many of
/// them); CPU nanoseconds per run.
pub fn cpu_ns_per_run(budget_ns: u64, mut f: impl FnMut()) -> f64 {
    f();
    let start = thread_cpu_ns();
    let mut runs = 0u64;
    while thread_cpu_ns() - start < budget_ns {
        f();
        runs += 1;
    }
    (thread_cpu_ns() - start) as f64 / runs as f64
}
