//! The generation state machine driven one step at a time on an asynchronous backend double
//! (every decode is pending once): it answers `Step::Pending`, commits nothing while pending,
//! and ends with exactly the text, tokens and stop of the synchronous one-call `generate`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tessera_core::sampling::SamplingParams;
use tessera_core::{Context, ContextParams};
use tessera_runtime::generate::{generate, tokenize_prompt, GenerateParams, NoClock, StopReason};
use tessera_runtime::generation::{Generation, GenerationOptions, Step, PREFILL_STEP};
use tessera_testkit::*;

#[test]
fn pending_steps_end_with_the_synchronous_generation() {
    let model = load_model(SMOLLM2);
    let prompt = tokenize_prompt(model.tokenizer(), "The capital of France is");
    let requests = [
        GenerateParams {
            max_tokens: Some(10),
            sampling: SamplingParams::greedy(),
            stop: vec![],
            ignore_eos: false,
            grammar: None,
        },
        GenerateParams {
            max_tokens: Some(10),
            sampling: SamplingParams {
                seed: 11,
                ..SamplingParams::default()
            },
            stop: vec![". ".into()],
            ignore_eos: true,
            grammar: None,
        },
    ];
    for params in requests {
        let mut sync_ctx = context(&model, 128, 4, 1);
        let mut want_text = String::new();
        let want = generate(&mut sync_ctx, &prompt, &params, &NoClock, &mut |t| {
            want_text.push_str(t);
            true
        })
        .unwrap();

        let pending = Arc::new(AtomicUsize::new(0));
        let backend = Box::new(AsyncCpuBackend::new(pending.clone()));
        let ctx_params = ContextParams {
            n_ctx: 128,
            n_batch: 4,
        };
        let mut ctx = Context::new(model.clone(), ctx_params, backend).unwrap();
        let options = GenerationOptions {
            prefill_step: PREFILL_STEP,
            ..GenerationOptions::default()
        };
        let mut generation =
            Generation::start(&mut ctx, prompt.clone(), params.clone(), options, &NoClock).unwrap();
        let (mut text, mut n_pending, mut n_prefilled) = (String::new(), 0, 0);
        let stats = loop {
            let n_past = ctx.n_past();
            match generation.step(&mut ctx, &NoClock).unwrap() {
                Step::Pending => {
                    n_pending += 1;
                    assert_eq!(ctx.n_past(), n_past, "a pending step commits nothing");
                    assert!(!generation.is_finished());
                }
                Step::Prefilled {
                    n_decoded,
                    n_prompt,
                } => {
                    n_prefilled += 1;
                    assert_eq!(n_decoded, ctx.n_past());
                    assert_eq!(n_prompt, prompt.len());
                }
                Step::Tokens { ids, text: piece } => {
                    assert_eq!(ids.len(), 1, "no speculation: one token per step");
                    text.push_str(&piece);
                }
                Step::Done {
                    text: piece,
                    stats,
                    speculative,
                } => {
                    assert!(speculative.is_none());
                    text.push_str(&piece);
                    break stats;
                }
            }
        };
        assert!(generation.is_finished());
        assert_eq!(text, want_text);
        assert_eq!(stats.tokens, want.tokens);
        assert_eq!(stats.stop, want.stop);
        // The prompt in micro-batches of 4, each pending once; then one pending decode per
        // token after the first.
        assert_eq!(n_prefilled, prompt.len().div_ceil(4));
        assert_eq!(n_pending, n_prefilled + stats.n_generated - 1);
        assert_eq!(pending.load(Ordering::Relaxed), n_pending);
        assert!(
            generation.step(&mut ctx, &NoClock).is_err(),
            "an ended generation"
        );
    }
}

/// With a context shift, a generation that fills its context drops half of what follows the
/// kept positions and goes on to its token limit; without, it ends at the full context.
#[test]
fn a_context_shift_lets_a_generation_go_past_a_full_context() {
    let model = load_model(SMOLLM2);
    let prompt = tokenize_prompt(model.tokenizer(), "Once upon a time");
    let params = GenerateParams {
        max_tokens: Some(80),
        sampling: SamplingParams::greedy(),
        stop: vec![],
        ignore_eos: true,
        grammar: None,
    };
    let run = |shift: Option<usize>| {
        let mut ctx = context(&model, 48, 16, 1);
        let options = GenerationOptions {
            context_shift: shift,
            ..GenerationOptions::default()
        };
        let mut generation =
            Generation::start(&mut ctx, prompt.clone(), params.clone(), options, &NoClock).unwrap();
        loop {
            if let Step::Done { stats, .. } = generation.step(&mut ctx, &NoClock).unwrap() {
                assert!(ctx.n_past() <= 48);
                // The kept positions are the prompt's first tokens.
                assert_eq!(ctx.tokens()[..1], prompt[..1]);
                return stats;
            }
        }
    };
    let full = run(None);
    assert_eq!(full.stop, StopReason::ContextFull);
    assert!(full.n_generated < 48);
    let shifted = run(Some(1));
    assert_eq!(shifted.stop, StopReason::MaxTokens);
    assert_eq!(shifted.n_generated, 80);
    // Up to the first shift both generate the same tokens.
    assert_eq!(
        shifted.tokens[..full.tokens.len() - 1],
        full.tokens[..full.tokens.len() - 1]
    );
}
