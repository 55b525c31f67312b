//! `tessera bench`: prompt-processing and generation speed, measured the way llama-bench does.
//!
//! - ppN: one decode of N tokens (in micro-batches) starting from an empty KV cache;
//! - tgN: N single-token decodes starting from an empty cache;
//! - with a depth d, d tokens are decoded first (not timed) in each repetition.
//!
//! Tokens are random ids (the first is BOS when the model adds one), as in llama-bench. Each
//! test runs once as a warm-up, then `-r` timed repetitions; t/s is the mean over repetitions
//! with the sample standard deviation.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::bail;
use serde::Serialize;
use tessera_core::sampling::Rng;
use tessera_core::{Context, ContextParams, Model};
use tessera_quant::isa::{self, Level};

use crate::args::BenchArgs;
use crate::load::{load_model, thread_pool};
use crate::model_path;

#[derive(Serialize, Debug, Clone)]
pub struct BenchResult {
    pub model_filename: String,
    pub model_type: String,
    pub model_size: u64,
    pub model_n_params: u64,
    pub backends: String,
    pub n_batch: usize,
    pub n_threads: usize,
    pub n_prompt: usize,
    pub n_gen: usize,
    pub n_depth: usize,
    pub avg_ns: u64,
    pub stddev_ns: u64,
    pub avg_ts: f64,
    pub stddev_ts: f64,
    pub samples_ns: Vec<u64>,
    pub samples_ts: Vec<f64>,
}

impl BenchResult {
    fn test_name(&self) -> String {
        let base = if self.n_prompt > 0 {
            format!("pp{}", self.n_prompt)
        } else {
            format!("tg{}", self.n_gen)
        };
        if self.n_depth > 0 {
            format!("{base} @ d{}", self.n_depth)
        } else {
            base
        }
    }
}

pub fn bench(args: BenchArgs) -> anyhow::Result<()> {
    if args.repetitions == 0 {
        bail!("-r must be at least 1");
    }
    if args.batch_size == 0 {
        bail!("-b must be at least 1");
    }
    if let Some(name) = &args.cpu_isa {
        let level = [Level::Scalar, Level::Avx2, Level::Avx512, Level::Simd128]
            .into_iter()
            .find(|l| l.name() == name)
            .expect("clap checked the name");
        isa::force_level(Some(level))?;
    }
    let json = args.json || args.output == "json";
    let models: Vec<PathBuf> = if args.models.is_empty() {
        vec![model_path::resolve(None)?]
    } else {
        args.models.clone()
    };
    let threads = if args.threads.is_empty() {
        vec![tessera_backend_cpu::available_threads()]
    } else {
        args.threads.clone()
    };
    if threads.contains(&0) {
        bail!("-t must be at least 1");
    }
    let mut results = Vec::new();
    if !json {
        println!("| model | size | params | backend | threads | test | t/s |");
        println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |");
    }
    for path in &models {
        let model = load_model(path)?;
        for &t in &threads {
            let pool = thread_pool(Some(t))?;
            let probe = args.roofline.then(crate::roofline::BandwidthProbe::new);
            let tests = args
                .n_prompt
                .iter()
                .filter(|&&p| p > 0)
                .map(|&p| (p, 0))
                .chain(args.n_gen.iter().filter(|&&n| n > 0).map(|&n| (0, n)));
            for (n_prompt, n_gen) in tests {
                for &n_depth in &args.n_depth {
                    let params = ContextParams {
                        n_ctx: n_depth + n_prompt + n_gen,
                        n_batch: args.batch_size,
                    };
                    let mut ctx =
                        crate::load::context_on(&model, params, pool.clone(), &args.backend)?;
                    // The roofline's bandwidth, read before each timed decode repetition.
                    let mut bandwidths = Vec::new();
                    let mut before_rep = || {
                        if let (Some(probe), true) = (&probe, n_gen > 0) {
                            bandwidths.push(probe.measure(pool.as_ref()));
                        }
                    };
                    let r = run_test(
                        &mut ctx,
                        path,
                        &model,
                        (n_prompt, n_gen, n_depth),
                        (args.repetitions, &mut before_rep),
                        t,
                    )?;
                    let r = BenchResult {
                        backends: backend_label(&args.backend.backend, args.cpu_isa.is_some()),
                        ..r
                    };
                    if !json {
                        println!(
                            "| {} | {} | {} | {} | {} | {} | {:.2} ± {:.2} |",
                            r.model_type,
                            mib(r.model_size),
                            params_label(r.model_n_params),
                            r.backends,
                            r.n_threads,
                            r.test_name(),
                            r.avg_ts,
                            r.stddev_ts
                        );
                    }
                    if !bandwidths.is_empty() {
                        let test = r.test_name();
                        let line =
                            crate::roofline::line(&test, r.model_size, &r.samples_ts, &bandwidths);
                        eprintln!("{line}");
                    }
                    results.push(r);
                }
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    }
    Ok(())
}

/// llama-bench's backend name; a forced CPU kernel family is named after it.
fn backend_label(backend: &str, forced_isa: bool) -> String {
    match backend {
        "wgpu" => "WebGPU".into(),
        "cuda" => "CUDA".into(),
        "vulkan" => "Vulkan".into(),
        "auto" => "auto".into(),
        _ if forced_isa => format!("CPU ({})", isa::level().name()),
        _ => "CPU".into(),
    }
}

fn run_test(
    ctx: &mut Context,
    path: &Path,
    model: &Arc<Model>,
    (n_prompt, n_gen, n_depth): (usize, usize, usize),
    (reps, before_rep): (usize, &mut dyn FnMut()),
    n_threads: usize,
) -> anyhow::Result<BenchResult> {
    let n_vocab = model.n_vocab() as u64;
    let bos = model
        .tokenizer()
        .bos()
        .filter(|_| model.tokenizer().add_bos());
    let mut rng = Rng::new(1234);
    let mut random_tokens = |n: usize, first_bos: bool| -> Vec<u32> {
        (0..n)
            .map(|i| match bos {
                Some(b) if i == 0 && first_bos => b,
                _ => (rng.next_u64() % n_vocab) as u32,
            })
            .collect()
    };
    let depth_tokens = random_tokens(n_depth, true);
    let prompt = random_tokens(n_prompt, n_depth == 0);
    let gen = random_tokens(n_gen, n_depth == 0);
    let one = |ctx: &mut Context, timed_gen: &[u32]| -> anyhow::Result<u64> {
        ctx.clear();
        if !depth_tokens.is_empty() {
            ctx.decode(&depth_tokens, false)?;
        }
        let start = Instant::now();
        if !prompt.is_empty() {
            ctx.decode(&prompt, false)?;
        }
        for &tok in timed_gen {
            ctx.decode(&[tok], false)?;
        }
        Ok(start.elapsed().as_nanos() as u64)
    };
    // Warm-up: the prompt test once, the generation test with one token (as llama-bench).
    one(ctx, &gen[..gen.len().min(1)])?;
    let mut samples_ns = Vec::with_capacity(reps);
    for _ in 0..reps {
        before_rep();
        samples_ns.push(one(ctx, &gen)?);
    }
    let n_tokens = (n_prompt + n_gen) as f64;
    let samples_ts: Vec<f64> = samples_ns
        .iter()
        .map(|&ns| n_tokens * 1e9 / ns.max(1) as f64)
        .collect();
    let (avg_ns, stddev_ns) =
        mean_stddev(&samples_ns.iter().map(|&x| x as f64).collect::<Vec<_>>());
    let (avg_ts, stddev_ts) = mean_stddev(&samples_ts);
    let header = model.weights().file().header();
    Ok(BenchResult {
        model_filename: path.display().to_string(),
        model_type: model_type(model, header),
        model_size: header.tensors.iter().map(|t| t.size).sum(),
        model_n_params: header.tensors.iter().map(|t| t.n_elements()).sum(),
        backends: "CPU".into(),
        n_batch: ctx.n_batch(),
        n_threads,
        n_prompt,
        n_gen,
        n_depth,
        avg_ns: avg_ns as u64,
        stddev_ns: stddev_ns as u64,
        avg_ts,
        stddev_ts,
        samples_ns,
        samples_ts,
    })
}

/// Mean and sample standard deviation (0 for one sample), as llama-bench reports them.
pub fn mean_stddev(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn params_label(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.2} B", n as f64 / 1e9)
    } else {
        format!("{:.2} M", n as f64 / 1e6)
    }
}

/// "llama 135M Q4_1": architecture, parameter count, file type (as llama.cpp names them).
fn model_type(model: &Model, header: &tessera_gguf::Header) -> String {
    let ftype = header
        .get_u64("general.file_type")
        .map(ftype_name)
        .unwrap_or("?");
    let size = header
        .get_str("general.size_label")
        .map(str::to_owned)
        .unwrap_or_else(|| {
            params_label(header.tensors.iter().map(|t| t.n_elements()).sum()).replace(' ', "")
        });
    format!("{} {size} {ftype}", model.arch())
}

/// llama.cpp's `llama_ftype` names.
fn ftype_name(id: u64) -> &'static str {
    match id {
        0 => "all F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K - Medium",
        11 => "Q3_K - Small",
        12 => "Q3_K - Medium",
        13 => "Q3_K - Large",
        14 => "Q4_K - Small",
        15 => "Q4_K - Medium",
        16 => "Q5_K - Small",
        17 => "Q5_K - Medium",
        18 => "Q6_K",
        32 => "BF16",
        38 => "MXFP4 MoE",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_stddev() {
        let (m, s) = mean_stddev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((m - 5.0).abs() < 1e-12);
        assert!((s - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(mean_stddev(&[3.0]), (3.0, 0.0));
    }
}
