//! Speculative-decoding parameter sweep without timing noise.
//!
//! `cargo run --release -p tessera-engine-dev --bin spec-sweep -- MODEL.gguf PROMPT.txt [-n 512]
//! [-t 2] [--chat] [--reps 5]`
//!
//! 1. Generates the plain greedy continuation of the prompt once with the real model (stopping at
//!    end-of-generation like `tessera bench-spec`).
//! 2. Measures what a decode call of `b` tokens costs the real model (`b` = 1 plain, `b` > 1 a
//!    verify batch with every row's logits), the fastest of `--reps` calls at the middle of the
//!    generation, so `cost(b) / cost(1)` is the price of a verify batch in decode steps.
//! 3. Replays speculative decoding (the engine's own speculators, with the draft room and
//!    acceptance rules of `Generation`) against that continuation: with greedy sampling the
//!    speculative output is the plain one (the identity tests check it), so a draft's accepted
//!    tokens are its prefix that matches the continuation, and the target steps and batch sizes
//!    are exactly those of a real run, for any parameters, in milliseconds. The predicted
//!    speed-up is Σ plain cost(1) / Σ cost(batch of each step).

use std::sync::Arc;
use std::time::Instant;

use tessera_backend_cpu::CpuBackend;
use tessera_core::sampling::SamplingParams;
use tessera_core::{Context, ContextParams};
use tessera_runtime::generate::{
    generate, tokenize_chat, tokenize_prompt, GenerateParams, NoClock,
};
use tessera_runtime::speculative::{SpecError, SpecParams, SpecType, SpeculatorChain};
use tessera_tokenizer::chat_template::ChatMessage;

use tessera_engine_dev::{load_model, usize_flag};
use tessera_testkit::RayonPool;

/// What a replayed speculative generation did.
#[derive(Default)]
struct Replay {
    steps: usize,
    drafted: usize,
    accepted: usize,
    /// Tokens decoded by each target step (1 + its draft).
    batches: Vec<usize>,
}

/// Greedy speculative decoding with `chain` whose output is known: `seq` is the prompt
/// (`n_prompt` tokens) then the `max_tokens`-limited plain output. Each step drafts after the
/// committed tokens, in the room `Generation` gives a draft (the batch, and the tokens still
/// wanted; the context is large enough here), and commits the draft's prefix that matches the
/// output plus the target's own next token.
fn replay(
    chain: &mut SpeculatorChain,
    seq: &[u32],
    n_prompt: usize,
    max_tokens: usize,
    n_batch: usize,
) -> Result<Replay, SpecError> {
    chain.begin(&seq[..n_prompt])?;
    let n_out = seq.len() - n_prompt;
    let mut r = Replay::default();
    // The first output token comes from the prompt's logits; the last committed one is not
    // evaluated yet.
    let mut done = 1;
    while done < n_out {
        let (history, last) = (&seq[..n_prompt + done - 1], seq[n_prompt + done - 1]);
        let room = (n_batch - 1).min(max_tokens.saturating_sub(done + 1));
        let draft = if room > 0 {
            chain.draft(history, last, room)?
        } else {
            Vec::new()
        };
        let accepted = draft
            .iter()
            .zip(&seq[n_prompt + done..])
            .take_while(|(d, t)| d == t)
            .count();
        if !draft.is_empty() {
            chain.accept(accepted);
        }
        r.steps += 1;
        r.drafted += draft.len();
        r.accepted += accepted;
        r.batches.push(1 + draft.len());
        done += accepted + 1;
    }
    Ok(r)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        return Err(
            "usage: spec_sweep MODEL.gguf PROMPT.txt [-n N] [-t N] [--chat] [--reps N]".into(),
        );
    }
    let opt = |flag: &str, default: usize| usize_flag(&args, flag, default);
    let (n_predict, threads, reps) = (opt("-n", 512), opt("-t", 2), opt("--reps", 5));
    let chat = args.iter().any(|a| a == "--chat");
    let model = load_model(&args[0])?;
    let text = std::fs::read_to_string(&args[1])?;
    let tok = model.tokenizer();
    let prompt = if chat {
        let template = model.chat_template()?.ok_or("no chat template")?;
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
            let params = GenerateParams {
                max_tokens: Some(n_predict),
                sampling: SamplingParams::greedy(),
                ..GenerateParams::default()
            };
            let t0 = Instant::now();
            let g = generate(&mut ctx, &prompt, &params, &NoClock, &mut |_| true)?;
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

    // The prompt and the plain output (an end-of-generation token included: a draft may
    // propose it).
    let mut seq: Vec<u32> = prompt.clone();
    seq.extend_from_slice(&plain.tokens);

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
    // Both sample the first token from the prompt's logits, then take steps.
    let plain_cost = plain.n_generated.saturating_sub(1) as f64;
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
                    let r = replay(&mut chain, &seq, prompt.len(), n_predict, 512)?;
                    let spec_cost: f64 = r.batches.iter().map(|&b| cost(b)).sum::<f64>();
                    println!(
                        "| {} | {n} | {m} | {dmax} | {} | {} | {} | {:.2}× |",
                        ty.cli_name(),
                        r.steps,
                        r.drafted,
                        r.accepted,
                        plain_cost / spec_cost,
                    );
                }
            }
        }
    }
    Ok(())
}
