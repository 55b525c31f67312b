//! Speculative decoding on the real test models: with greedy sampling the output is the same,
//! token for token, as plain decoding, for every speculator type, on both models (SmolLM2 as its
//! own draft; SmolLM2 drafting for Gemma 3 through text translation).

use tessera_testkit::*;

use std::sync::Arc;

use tessera_core::sampling::{Sampler, SamplingParams};
use tessera_core::Model;
use tessera_runtime::speculative::{
    draft_model_speculator, generate, GenerateOptions, Generated, NgramCache, SpecParams, SpecType,
    Speculator, SpeculatorChain,
};

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

fn run(model: &Arc<Model>, spec: Option<&mut SpeculatorChain>) -> Generated {
    let mut ctx = context(model, 1024, 512, 2);
    let prompt = rewrite_prompt(model);
    let mut sampler = Sampler::new(SamplingParams::greedy()).unwrap();
    generate(
        &mut ctx,
        &mut sampler,
        spec,
        &prompt,
        &GenerateOptions {
            n_predict: N_PREDICT,
        },
        // Never stop at end-of-generation: the comparison always covers N_PREDICT tokens,
        // whatever the model's continuation happens to be.
        |_| false,
        |_| true,
    )
    .expect("generate")
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
    let t0 = std::time::Instant::now();
    let plain = run(&target, None);
    eprintln!(
        "{target_file}: plain run {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        plain.tokens.len() >= 32,
        "{target_file}: plain decoding stopped after {} tokens",
        plain.tokens.len()
    );
    let text = target.tokenizer().decode(&plain.tokens, false);
    eprintln!("{target_file} plain output: {text:?}");
    for t in [
        SpecType::NgramSimple,
        SpecType::NgramMapK,
        SpecType::NgramMapK4v,
        SpecType::NgramCache,
        SpecType::Draft,
    ] {
        let mut c = chain(t, &target, Some(&draft));
        let t0 = std::time::Instant::now();
        let spec = run(&target, Some(&mut c));
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
        let (acc, gen) = c.acceptance();
        assert!(gen > 0, "{target_file} {t}: nothing was drafted");
        assert!(acc > 0, "{target_file} {t}: no draft token was accepted");
        assert!(
            spec.n_target_steps < plain.n_target_steps,
            "{target_file} {t}: {} target steps vs {} plain",
            spec.n_target_steps,
            plain.n_target_steps
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
