//! Continuous batching: generations of one context stepped together (`step_together`) share
//! one forward pass per round, and each commits exactly the tokens and text it gives alone:
//! greedy and seeded sampling, a stop string, a prompt sliced across rounds beside other
//! streams' decode tokens, and a request that joins later. On a backend that does not batch
//! sequences every generation steps alone, with the same result.

use std::sync::Arc;

use tessera_core::sampling::SamplingParams;
use tessera_core::{Context, ContextParams, Model};
use tessera_runtime::generate::{generate, tokenize_prompt, GenerateParams, NoClock};
use tessera_runtime::generation::{
    step_together, Generation, GenerationOptions, Step, PREFILL_STEP,
};
use tessera_testkit::*;

const N_BATCH: usize = 16;

fn requests(model: &Model) -> Vec<(Vec<u32>, GenerateParams)> {
    let greedy = |max| GenerateParams {
        max_tokens: Some(max),
        sampling: SamplingParams::greedy(),
        stop: vec![],
        ignore_eos: false,
        grammar: None,
    };
    let long = "Continuous batching lets a server decode the next token of every running \
                request in one forward pass, reading the weights once per step instead of \
                once per request. Summarize that in one sentence:";
    let prompts = [
        "The capital of France is",
        "Once upon a time",
        long,
        "1, 2, 3, 4,",
    ];
    let params = [
        greedy(12),
        GenerateParams {
            max_tokens: Some(16),
            sampling: SamplingParams {
                seed: 5,
                ..SamplingParams::default()
            },
            stop: vec![],
            ignore_eos: true,
            grammar: None,
        },
        greedy(8),
        GenerateParams {
            stop: vec![", 9".into()],
            ..greedy(20)
        },
    ];
    prompts
        .iter()
        .map(|p| tokenize_prompt(model.tokenizer(), p))
        .zip(params)
        .collect()
}

/// Each request alone in its own context: (tokens, text).
fn alone(model: &Arc<Model>) -> Vec<(Vec<u32>, String)> {
    requests(model)
        .into_iter()
        .map(|(prompt, params)| {
            let mut ctx = context(model, 256, N_BATCH, 2);
            let mut text = String::new();
            let stats = generate(&mut ctx, &prompt, &params, &NoClock, &mut |t| {
                text.push_str(t);
                true
            })
            .unwrap();
            (stats.tokens, text)
        })
        .collect()
}

/// All requests stepped together in one context of four sequences, the last joining at
/// round 3: each request's (tokens, text), the rounds and the forward passes.
fn together(model: &Arc<Model>, batches: bool) -> (Vec<(Vec<u32>, String)>, usize, usize) {
    let counts = Arc::new(BatchCounts::default());
    let backend = Box::new(CountedCpuBackend::new(2, counts.clone(), batches));
    let params = ContextParams {
        n_ctx: 256,
        n_batch: N_BATCH,
    };
    let mut ctx = Context::with_sequences(model.clone(), params, 4, backend).unwrap();
    assert_eq!(ctx.batches_sequences(), batches);
    let reqs = requests(model);
    let mut running: Vec<Option<(Generation, String)>> = (0..reqs.len()).map(|_| None).collect();
    let mut results = vec![None; reqs.len()];
    let mut round = 0;
    while results.iter().any(Option::is_none) {
        for (i, (prompt, params)) in reqs.iter().enumerate() {
            let joins = if i == 3 { round == 3 } else { round == 0 };
            if joins {
                ctx.select(i).unwrap();
                let options = GenerationOptions {
                    prefill_step: PREFILL_STEP,
                    ..GenerationOptions::default()
                };
                let g =
                    Generation::start(&mut ctx, prompt.clone(), params.clone(), options, &NoClock)
                        .unwrap();
                assert_eq!(g.sequence(), i);
                running[i] = Some((g, String::new()));
            }
        }
        let (indices, mut gens): (Vec<usize>, Vec<&mut Generation>) = running
            .iter_mut()
            .enumerate()
            .filter_map(|(i, r)| r.as_mut().map(|(g, _)| (i, g)))
            .unzip();
        let steps = step_together(&mut ctx, &mut gens, &NoClock);
        drop(gens);
        for (i, step) in indices.into_iter().zip(steps) {
            let (_, text) = running[i].as_mut().unwrap();
            match step.map(Result::unwrap) {
                Some(Step::Tokens { text: piece, .. }) => text.push_str(&piece),
                Some(Step::Done {
                    text: piece, stats, ..
                }) => {
                    text.push_str(&piece);
                    results[i] = Some((stats.tokens, std::mem::take(text)));
                    running[i] = None;
                }
                Some(Step::Prefilled { .. }) | None => {}
                Some(Step::Pending) => panic!("the CPU backend is synchronous"),
            }
        }
        round += 1;
        assert!(round < 500, "the generations do not end");
    }
    let results = results.into_iter().map(Option::unwrap).collect();
    if batches {
        assert!(counts.most_sequences() >= 3, "{counts:?}");
    } else {
        assert_eq!(counts.most_sequences(), 1);
    }
    (results, round, counts.passes())
}

#[test]
fn generations_stepped_together_commit_what_they_commit_alone() {
    let model = load_model(SMOLLM2);
    let want = alone(&model);
    let (got, rounds, passes) = together(&model, true);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(w, g, "request {i}: together differs from alone");
    }
    // One forward pass per round at most: the streams' tokens share it.
    assert!(passes <= rounds, "{passes} passes in {rounds} rounds");
}

#[test]
fn a_backend_that_does_not_batch_sequences_steps_each_alone() {
    let model = load_model(SMOLLM2);
    let want = alone(&model);
    let (got, rounds, passes) = together(&model, false);
    assert_eq!(want, got);
    assert!(passes > rounds, "{passes} passes in {rounds} rounds");
}
