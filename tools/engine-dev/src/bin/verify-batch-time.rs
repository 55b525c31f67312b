//! Repeats one decode call of `b` tokens (a speculative verify batch, every row's logits) at a
//! fixed position, for profiling (`perf record`) and timing.
//!
//! `cargo run --release -p tessera-engine-dev --bin verify-batch-time -- MODEL.gguf [-b 4]
//! [-pos 600] [-iters 100] [-t 2]`: decodes `pos` tokens of filler, then times `iters` calls of
//! `decode(b tokens, all logits)`, each after truncating back to `pos`, and prints the medians of
//! the wall time and of the calling thread's CPU time (the whole cost with `-t 1`).

use std::sync::Arc;
use std::time::Instant;

use tessera_backend_cpu::CpuBackend;
use tessera_core::{Context, ContextParams};

use tessera_engine_dev::{load_model, usize_flag};
use tessera_testkit::RayonPool;

/// CPU time of this thread (Linux schedstat; holds on a loaded machine). With `-t 1` all the
/// work runs on this thread, so it is the call's whole compute cost.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return Err("usage: verify_prof MODEL.gguf [-b 4] [-pos 600] [-iters 100] [-t 2]".into());
    }
    let opt = |flag: &str, default: usize| usize_flag(&args, flag, default);
    let (b, pos, iters, threads) = (
        opt("-b", 4),
        opt("-pos", 600),
        opt("-iters", 100),
        opt("-t", 2),
    );
    let model = load_model(&args[0])?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let mut ctx = Context::new(
        model.clone(),
        ContextParams {
            n_ctx: pos + b + 16,
            n_batch: 512,
        },
        Box::new(CpuBackend::new(Arc::new(RayonPool(threads)))),
    )?;
    // Filler tokens: a fixed cycle of small ids (any valid ids do for timing).
    let seq: Vec<u32> = (0..pos + b)
        .map(|i| 100 + (i as u32 * 7919) % 5000)
        .collect();
    let times = pool
        .install(
            || -> Result<Vec<(f64, f64)>, Box<dyn std::error::Error + Send + Sync>> {
                ctx.decode(&seq[..pos], false)?;
                let mut times = Vec::with_capacity(iters);
                for _ in 0..iters {
                    ctx.truncate(pos);
                    let (t, cpu) = (Instant::now(), thread_cpu_ns());
                    ctx.decode(&seq[pos..pos + b], b > 1)?;
                    let cpu = (thread_cpu_ns() - cpu) as f64 * 1e-9;
                    times.push((t.elapsed().as_secs_f64(), cpu));
                }
                Ok(times)
            },
        )
        .map_err(|e| e.to_string())?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0])
    };
    let (wall, wall_min) = median(times.iter().map(|t| t.0).collect());
    let (cpu, _) = median(times.iter().map(|t| t.1).collect());
    println!(
        "b={b} pos={pos} t={threads}: wall median {:.2} ms (min {:.2}); CPU of the calling \
         thread median {:.2} ms over {iters} calls",
        wall * 1e3,
        wall_min * 1e3,
        cpu * 1e3
    );
    Ok(())
}
