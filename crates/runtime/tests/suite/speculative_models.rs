//! Speculative decoding on the real test models: with greedy sampling the output is the same,
//! token for token, as plain decoding, for every speculator type, on both models (SmolLM2 as its
//! own draft; SmolLM2 drafting for Gemma 3 through text translation).

use tessera_testkit::*;

use std::sync::Arc;

use tessera_core::sampling::SamplingParams;
use tessera_core::Model;
use tessera_runtime::generate::{generate, generate_speculative, GenerateParams, NoClock};
use tessera_runtime::speculative::{
    draft_model_speculator, NgramCache, SpecParams, SpecType, Speculator, SpeculatorChain,
};
use tessera_runtime::StopReason;

const N_PREDICT: usize = 64;

/// A short repetitive prompt (the full rewrite workload, tests/prompts/rewrite_code.txt, is the
/// benchmark's; this one keeps the test fast). The block is given twice and a third copy is
/// begun, so that both models continue the repetition and every n-gram type finds drafts.
const PROMPT: &str = "Copy the code exactly, three times.

def area(w, h):
    return w * h

def perimeter(w, h):
    return 2 * (w + h)

def describe(w, h):
    return f\"{w}x{h}: area {area(w, h)}, perimeter {perimeter(w, h)}\"

def area(w, h):
    return w * h

def perimeter(w, h):
    return 2 * (w + h)

def describe(w, h):
    return f\"{w}x{h}: area {area(w, h)}, perimeter {perimeter(w, h)}\"

def area(w, h):
";

fn rewrite_prompt(model: &Model) -> Vec<u32> {
    model.tokenizer().encode(PROMPT, true, true)
}

/// What a run produced: its tokens and stop, the target steps after the prompt, and the KV
/// cache's length afterwards.
struct Run {
    tokens: Vec<u32>,
    stop: StopReason,
    steps: usize,
    n_past: usize,
}

/// Greedy generation after `prompt` in a context of `n_ctx`, through the generation state
/// machine, speculative when `chain` is given (then also the chain, given back).
fn run_with(
    model: &Arc<Model>,
    prompt: &[u32],
    n_ctx: usize,
    params: &GenerateParams,
    chain: Option<SpeculatorChain>,
) -> (Run, Option<SpeculatorChain>) {
    let mut ctx = context(model, n_ctx, 512, 2);
    match chain {
        Some(chain) => {
            let (stats, report, chain) =
                generate_speculative(&mut ctx, prompt, params, chain, &NoClock, &mut |_| true)
                    .expect("generate");
            assert_eq!(
                (report.n_drafted, report.n_accepted),
                (chain.acceptance().1, chain.acceptance().0)
            );
            let run = Run {
                tokens: stats.tokens,
                stop: stats.stop,
                steps: report.n_steps,
                n_past: ctx.n_past(),
            };
            (run, Some(chain))
        }
        None => {
            let stats =
                generate(&mut ctx, prompt, params, &NoClock, &mut |_| true).expect("generate");
            let run = Run {
                steps: stats.n_generated.saturating_sub(1),
                tokens: stats.tokens,
                stop: stats.stop,
                n_past: ctx.n_past(),
            };
            (run, None)
        }
    }
}

/// `N_PREDICT` greedy tokens of the rewrite prompt. End-of-generation tokens are never sampled,
/// so the comparison always covers N_PREDICT tokens, whatever the model's continuation.
fn greedy_params(max_tokens: usize) -> GenerateParams {
    GenerateParams {
        max_tokens: Some(max_tokens),
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    }
}

/// Small n-grams so that drafts are frequent and often partly rejected.
fn params(t: SpecType) -> SpecParams {
    SpecParams {
        spec_type: t,
        ngram_size_n: 4,
        ngram_size_m: 16,
        ..SpecParams::default()
    }
}

fn chain(t: SpecType, target: &Arc<Model>, draft: Option<&Arc<Model>>) -> SpeculatorChain {
    let p = params(t);
    let draft_spec: Option<Box<dyn Speculator>> = match (t, draft) {
        (SpecType::Draft, Some(d)) => {
            let ctx = context(d, 1024, 512, 2);
            Some(Box::new(draft_model_speculator(target, ctx, &p).unwrap()))
        }
        _ => None,
    };
    let (static_cache, dynamic_cache) = if t == SpecType::NgramCache {
        // A static cache from a corpus (the prompt itself), through its file format.
        let corpus = rewrite_prompt(target);
        let bytes = NgramCache::from_corpus(&corpus).to_bytes();
        (Some(NgramCache::from_bytes(&bytes).unwrap()), None)
    } else {
        (None, None)
    };
    SpeculatorChain::from_params(&p, static_cache, dynamic_cache, draft_spec).unwrap()
}

fn check_identity(target_file: &str, draft_file: &str) {
    let target = load_model(target_file);
    let draft = load_model(draft_file);
    let prompt = rewrite_prompt(&target);
    let params = greedy_params(N_PREDICT);
    let t0 = std::time::Instant::now();
    let (plain, _) = run_with(&target, &prompt, 1024, &params, None);
    eprintln!(
        "{target_file}: plain run {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(plain.tokens.len(), N_PREDICT, "{target_file}");
    let text = target.tokenizer().decode(&plain.tokens, false);
    eprintln!("{target_file} plain output: {text:?}");
    for t in [
        SpecType::NgramSimple,
        SpecType::NgramMapK,
        SpecType::NgramMapK4v,
        SpecType::NgramCache,
        SpecType::Draft,
    ] {
        let c = chain(t, &target, Some(&draft));
        let t0 = std::time::Instant::now();
        let (spec, c) = run_with(&target, &prompt, 1024, &params, Some(c));
        let c = c.expect("the chain");
        eprintln!("{target_file} {t}: {:.1} s", t0.elapsed().as_secs_f64());
        for line in c.stats_lines() {
            eprintln!("{target_file} {t}: {line}");
        }
        if spec.tokens != plain.tokens {
            let at = spec
                .tokens
                .iter()
                .zip(&plain.tokens)
                .position(|(a, b)| a != b);
            panic!(
                "{target_file} {t}: output differs from plain decoding at token {at:?}\n spec: {:?}\nplain: {:?}",
                spec.tokens, plain.tokens
            );
        }
        assert_eq!(spec.stop, plain.stop, "{target_file} {t}");
        // Rejected draft tokens are gone from the KV cache: it holds the prompt and every
        // token but the last, as after plain decoding.
        assert_eq!(spec.n_past, plain.n_past, "{target_file} {t}");
        assert_eq!(plain.n_past, prompt.len() + N_PREDICT - 1);
        let (acc, gen) = c.acceptance();
        assert!(gen > 0, "{target_file} {t}: nothing was drafted");
        assert!(acc > 0, "{target_file} {t}: no draft token was accepted");
        assert!(
            spec.steps < plain.steps,
            "{target_file} {t}: {} target steps vs {} plain",
            spec.steps,
            plain.steps
        );
        let s = c.stats();
        let (sum_acc, sum_gen) = s
            .iter()
            .fold((0, 0), |(a, g), s| (a + s.n_acc_tokens, g + s.n_gen_tokens));
        assert_eq!((sum_acc, sum_gen), (acc, gen), "{target_file} {t}");
    }
}

#[test]
fn smollm2_greedy_speculative_output_is_identical() {
    check_identity(SMOLLM2, SMOLLM2);
}

#[test]
fn gemma3_greedy_speculative_output_is_identical() {
    check_identity(GEMMA3, SMOLLM2);
}

/// Every limit ends a speculative generation at the token plain decoding ends at: the token
/// limit inside a draft, a full context, a stop string, on SmolLM2 with an n-gram type and a
/// draft model.
#[test]
fn limits_stop_at_the_same_token_as_plain_decoding() {
    let model = load_model(SMOLLM2);
    let prompt = rewrite_prompt(&model);
    let n = prompt.len();
    let stop_params = |stop: &str| GenerateParams {
        stop: vec![stop.to_string()],
        ..greedy_params(N_PREDICT)
    };
    let cases = [
        ("1 token", n + 64, greedy_params(1)),
        ("2 tokens", n + 64, greedy_params(2)),
        ("7 tokens", n + 64, greedy_params(7)),
        ("context of prompt + 5", n + 5, greedy_params(N_PREDICT)),
        ("context of prompt + 18", n + 18, greedy_params(N_PREDICT)),
        ("stop string", n + 64, stop_params("perimeter")),
    ];
    for (name, n_ctx, params) in &cases {
        let (plain, _) = run_with(&model, &prompt, *n_ctx, params, None);
        let want = match *name {
            "stop string" => StopReason::StopString(0),
            n if n.starts_with("context") => StopReason::ContextFull,
            _ => StopReason::MaxTokens,
        };
        assert_eq!(plain.stop, want, "{name}");
        for t in [SpecType::NgramSimple, SpecType::Draft] {
            let c = chain(t, &model, Some(&model));
            let (spec, _) = run_with(&model, &prompt, *n_ctx, params, Some(c));
            assert_eq!(spec.tokens, plain.tokens, "{t} {name}");
            assert_eq!(spec.stop, plain.stop, "{t} {name}");
            assert!(spec.n_past <= *n_ctx, "{t} {name}");
        }
    }
}
