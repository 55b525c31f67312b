//! Quick speed check, llama-bench style: prompt processing of `-p` tokens and generation of
//! `-n` tokens, on a rayon pool of `-t` threads.
//! `cargo run --release -p tessera-engine-dev --bin engine-bench -- MODEL.gguf [-p 512] [-n 128]
//! [-t 2] [-r 3]`
//! (The real `tessera bench` lives in the CLI; this is the engine-only measurement.)

use std::sync::Arc;
use std::time::Instant;

use tessera_backend_cpu::CpuBackend;
use tessera_core::{Context, ContextParams, Model};

/// Runs tasks on the rayon pool the caller is running in: the whole benchmark runs inside
/// `pool.install`, so each op's tasks are picked up by already-running workers (no cross-thread
/// wake-up of the caller per op).
use tessera_engine_dev::{load_model, usize_flag};
use tessera_testkit::RayonPool;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: bench MODEL.gguf [-p N] [-n N] [-t N] [-r N]")?;
    let opt = |flag: &str, default: usize| usize_flag(&args, flag, default);
    let (n_p, n_g, threads, reps) = (opt("-p", 512), opt("-n", 128), opt("-t", 2), opt("-r", 3));
    let model = load_model(path)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let params = ContextParams {
        n_ctx: n_p + n_g + 1,
        n_batch: 512,
    };
    pool.install(|| run(&model, params, n_p, n_g, threads, reps).map_err(|e| e.to_string()))?;
    Ok(())
}

fn run(
    model: &Arc<Model>,
    params: ContextParams,
    n_p: usize,
    n_g: usize,
    threads: usize,
    reps: usize,
) -> Result<(), tessera_core::EngineError> {
    let backend = Box::new(CpuBackend::new(Arc::new(RayonPool(threads))));
    let mut ctx = Context::new(model.clone(), params, backend)?;
    let n_vocab = model.n_vocab() as u32;
    let prompt: Vec<u32> = (0..n_p as u32).map(|i| (i * 7919 + 13) % n_vocab).collect();
    for _ in 0..reps {
        ctx.clear();
        let t = Instant::now();
        if n_p > 0 {
            ctx.decode(&prompt, false)?;
        }
        let pp = t.elapsed().as_secs_f64();
        ctx.clear();
        let t = Instant::now();
        let mut tok = 1u32;
        for _ in 0..n_g {
            ctx.decode(&[tok], false)?;
            tok = (tok * 31 + 7) % n_vocab;
        }
        let tg = t.elapsed().as_secs_f64();
        println!(
            "{}  t={threads}  pp{n_p}: {:.1} t/s  tg{n_g}: {:.1} t/s",
            model.arch(),
            n_p as f64 / pp,
            n_g as f64 / tg
        );
    }
    Ok(())
}
