//! Speculative-decoding parameter sweep without timing noise.
//!
//! `cargo run --release -p tessera-runtime --example spec_sweep -- MODEL.gguf PROMPT.txt [-n 512] [-t 2]
//! [--chat] [--reps 5]`
//!
//! 1. Generates the plain greedy continuation of the prompt once with the real model (stopping at
//!    end-of-generation like `tessera bench-spec`).
//! 2. Measures what a decode call of `b` tokens costs the real model (`b` = 1 plain, `b` > 1 a
//!    verify batch with every row's logits), the fastest of `--reps` calls at the middle of the
//!    generation, so `cost(b) / cost(1)` is the price of a verify batch in decode steps.
//! 3. Replays the speculative loop (the engine's own `generate_after_prompt` and speculators)
//!    against an oracle context that returns the plain continuation: with greedy sampling the
//!    speculative output is that continuation (the identity tests check it), so the target steps
//!    and batch sizes are exactly those of a real run, for any parameters, in milliseconds.
//!    The predicted speed-up is Σ plain cost(1) / Σ cost(batch of each step).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tessera_backend_cpu::CpuBackend;
use tessera_core::sampling::{Sampler, SamplingParams};
use tessera_core::{Context, ContextParams, Model};
use tessera_runtime::generate::{tokenize_chat, tokenize_prompt};
use tessera_runtime::speculative::{
    generate, generate_after_prompt, GenerateOptions, SpecContext, SpecError, SpecParams, SpecType,
    SpeculatorChain,
};
use tessera_tokenizer::chat_template::{ChatMessage, ChatTemplate};

#[path = "support/args.rs"]
mod args;
use tessera_testkit::RayonPool;

/// Replays a known token sequence (densely renumbered: `seq` holds ids `< n_vocab`).
struct Oracle {
    seq: Vec<u32>,
    n_vocab: usize,
    n_past: usize,
    rows: Vec<f32>,
    n_rows: usize,
    batches: Vec<usize>,
}

impl SpecContext for Oracle {
    fn decode(&mut self, tokens: &[u32], _all: bool) -> Result<(), SpecError> {
        self.rows.clear();
        self.rows.resize(tokens.len() * self.n_vocab, 0.0);
        for i in 0..tokens.len() {
            // Row i predicts the token after position n_past + i; only rows after an accepted
            // prefix are read, and their prefix is the true sequence.
            let next = self.seq.get(self.n_past + i + 1).copied().unwrap_or(0);
            self.rows[i * self.n_vocab + next as usize] = 1.0;
        }
        self.n_rows = tokens.len();
        self.n_past += tokens.len();
        self.batches.push(tokens.len());
        Ok(())
    }
    fn last_logits(&self) -> &[f32] {
        &self.rows[(self.n_rows - 1) * self.n_vocab..self.n_rows * self.n_vocab]
    }
    fn all_logits(&self) -> &[f32] {
        &self.rows
    }
    fn n_past(&self) -> usize {
        self.n_past
    }
    fn truncate(&mut self, n: usize) -> Result<(), SpecError> {
        self.n_past = n;
        Ok(())
    }
    fn n_ctx(&self) -> usize {
        1 << 20
    }
    fn n_batch(&self) -> usize {
        512
    }
    fn n_vocab(&self) -> usize {
        self.n_vocab
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        return Err(
            "usage: spec_sweep MODEL.gguf PROMPT.txt [-n N] [-t N] [--chat] [--reps N]".into(),
        );
    }
    let opt = |flag: &str, default: usize| args::usize_flag(&args, flag, default);
    let (n_predict, threads, reps) = (opt("-n", 512), opt("-t", 2), opt("--reps", 5));
    let chat = args.iter().any(|a| a == "--chat");
    let model = Arc::new(Model::load(
        Arc::new(tessera_gguf::GgufFile::open(&args[0])?),
        &mut |_| {},
    )?);
    let text = std::fs::read_to_string(&args[1])?;
    let tok = model.tokenizer();
    let prompt = if chat {
        let template = ChatTemplate::from_gguf(model.weights().file().header(), tok)?
            .ok_or("no chat template")?;
        tokenize_chat(tok, &template, &[ChatMessage::new("user", text)])?
    } else {
        tokenize_prompt(tok, &text)
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let n_ctx = prompt.len() + n_predict + 64;
    let mut ctx = Context::new(
        model.clone(),
        ContextParams {
            n_ctx,
            n_batch: 512,
        },
        Box::new(CpuBackend::new(Arc::new(RayonPool(threads)))),
    )?;
    let (plain, costs) = pool
        .install(|| -> Result<_, Box<dyn std::error::Error + Send + Sync>> {
            let mut sampler = Sampler::new(SamplingParams::greedy())?;
            let t0 = Instant::now();
            let g = generate(
                &mut ctx,
                &mut sampler,
                None,
                &prompt,
                &GenerateOptions { n_predict },
                |t| tok.is_eog(t),
                |_| true,
            )?;
            eprintln!(
                "{} prompt tokens, plain: {} tokens ({:?}) in {:.1} s",
                prompt.len(),
                g.tokens.len(),
                g.stop,
                t0.elapsed().as_secs_f64()
            );
            // Cost of a decode call of b tokens at the middle of the generation.
            let base = prompt.len() + g.tokens.len() / 2;
            let mut seq = prompt.clone();
            seq.extend_from_slice(&g.tokens);
            let mut costs = Vec::new();
            for b in 1..=17usize {
                if ![1, 2, 3, 4, 5, 6, 7, 9, 13, 17].contains(&b) {
                    continue;
                }
                let mut best = f64::INFINITY;
                for _ in 0..reps {
                    ctx.truncate(base);
                    let t = Instant::now();
                    ctx.decode(&seq[base..base + b], b > 1)?;
                    best = best.min(t.elapsed().as_secs_f64());
                }
                costs.push((b, best));
            }
            Ok((g, costs))
        })
        .map_err(|e| e.to_string())?;
    let c1 = costs[0].1;
    print!("verify cost in decode steps (fastest of {reps}):");
    for (b, c) in &costs {
        print!("  b={b}: {:.2}", c / c1);
    }
    println!("  (b=1: {:.1} ms)", c1 * 1e3);
    let cost = |b: usize| -> f64 {
        // Linear interpolation between measured sizes.
        let i = costs
            .iter()
            .position(|(s, _)| *s >= b)
            .unwrap_or(costs.len() - 1);
        if costs[i].0 == b || i == 0 {
            return costs[i].1 / c1;
        }
        let ((b0, c0), (b1, cb)) = (costs[i - 1], costs[i]);
        (c0 + (cb - c0) * (b - b0) as f64 / (b1 - b0) as f64) / c1
    };

    // Dense renumbering so that the oracle's rows are short.
    let mut dense: HashMap<u32, u32> = HashMap::new();
    let mut seq: Vec<u32> = prompt.clone();
    seq.extend_from_slice(&plain.tokens);
    let eog = match plain.stop {
        tessera_runtime::StopReason::EndOfGeneration(t) => Some(t),
        _ => None,
    };
    seq.extend(eog);
    let ids: Vec<u32> = seq
        .iter()
        .map(|t| {
            let n = dense.len() as u32;
            *dense.entry(*t).or_insert(n)
        })
        .collect();
    let n_vocab = dense.len() + 1;
    let eog_dense = eog.map(|t| dense[&t]);
    let dprompt = ids[..prompt.len()].to_vec();

    println!(
        "| type | n | m | draft-max | target steps | drafted | accepted | predicted speed-up |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let types = [
        SpecType::NgramSimple,
        SpecType::NgramMapK,
        SpecType::NgramMapK4v,
        SpecType::NgramCache,
    ];
    // Both loops sample the first token from the prompt's logits, then take steps.
    let plain_cost = plain.n_target_steps as f64;
    for ty in types {
        for &n in &[2usize, 3, 4, 5, 6, 8, 12] {
            if ty == SpecType::NgramCache && n != 2 {
                continue; // n and m do not apply
            }
            for &m in &[16usize, 48] {
                if ty == SpecType::NgramCache && m != 48 {
                    continue;
                }
                for &dmax in &[4usize, 5, 6, 8, 12, 16] {
                    let params = SpecParams {
                        spec_type: ty,
                        n_max: dmax,
                        ngram_size_n: n,
                        ngram_size_m: m,
                        ..SpecParams::default()
                    };
                    let Ok(mut chain) = SpeculatorChain::from_params(&params, None, None, None)
                    else {
                        continue;
                    };
                    let mut oracle = Oracle {
                        seq: ids.clone(),
                        n_vocab,
                        n_past: 0,
                        rows: Vec::new(),
                        n_rows: 0,
                        batches: Vec::new(),
                    };
                    oracle.decode(&dprompt, false)?;
                    oracle.batches.clear();
                    let mut sampler = Sampler::new(SamplingParams::greedy())?;
                    let g = generate_after_prompt(
                        &mut oracle,
                        &mut sampler,
                        Some(&mut chain),
                        &dprompt,
                        &GenerateOptions { n_predict },
                        |t| Some(t) == eog_dense,
                        |_| true,
                    )?;
                    let same = g.tokens[..] == ids[prompt.len()..prompt.len() + g.tokens.len()]
                        && g.tokens.len() == plain.tokens.len();
                    let spec_cost: f64 = oracle.batches.iter().map(|&b| cost(b)).sum::<f64>();
                    println!(
                        "| {} | {n} | {m} | {dmax} | {} | {} | {} | {:.2}×{} |",
                        ty.cli_name(),
                        g.n_target_steps,
                        g.n_drafted,
                        g.n_accepted,
                        plain_cost / spec_cost,
                        if same { "" } else { " (replay differs!)" }
                    );
                }
            }
        }
    }
    Ok(())
}
