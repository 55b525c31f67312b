//! The generation loop on SmolLM2: greedy output equal to llama.cpp's (fixtures), stop strings,
//! limits, prefix reuse, reproducible sampling.

use tessera_testkit::*;

use tessera_core::sampling::SamplingParams;
use tessera_runtime::generate::{
    generate, tokenize_prompt, GenerateError, GenerateParams, NoClock, StopReason,
};

fn greedy(max: usize) -> GenerateParams {
    GenerateParams {
        max_tokens: Some(max),
        sampling: SamplingParams::greedy(),
        stop: vec![],
        ignore_eos: false,
        grammar: None,
    }
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn run(
    ctx: &mut tessera_core::Context,
    prompt: &[u32],
    p: &GenerateParams,
) -> (String, tessera_runtime::generate::GenerateStats) {
    let mut text = String::new();
    let stats = generate(ctx, prompt, p, &NoClock, &mut |t| {
        text.push_str(t);
        true
    })
    .expect("generate");
    (text, stats)
}

#[test]
fn greedy_tokens_and_text_match_llama_cpp() {
    let model = load_model(SMOLLM2);
    let tok = model.tokenizer();
    let mut ctx = context(&model, 512, 512, 2);
    for case in fixture("greedy_smollm2.jsonl") {
        let prompt_text = case["prompt"].as_str().unwrap();
        let prompt = tokenize_prompt(tok, prompt_text);
        assert_eq!(prompt, ids(&case["prompt_ids"]), "{prompt_text:?}");
        let want = ids(&case["gen_ids"]);
        // Up to the first end-of-generation token (llama.cpp's fixture ran past it).
        let first_eog = case["first_eog"].as_i64().unwrap();
        let n = if first_eog >= 0 {
            first_eog as usize
        } else {
            32
        }
        .min(32);
        let (text, stats) = run(&mut ctx, &prompt, &greedy(n));
        assert_eq!(stats.tokens, want[..n], "{prompt_text:?}");
        let want_text: Vec<u8> = want[..n]
            .iter()
            .flat_map(|&t| tok.token_to_piece(t, false))
            .collect();
        assert_eq!(text, String::from_utf8_lossy(&want_text), "{prompt_text:?}");
        assert_eq!(stats.stop, StopReason::MaxTokens);
        assert_eq!(stats.n_prompt, prompt.len());
    }
}

#[test]
fn stop_string_cuts_the_text_before_it() {
    let model = load_model(SMOLLM2);
    let mut ctx = context(&model, 256, 512, 2);
    let prompt = tokenize_prompt(model.tokenizer(), "The capital of France is");
    // llama.cpp's greedy continuation: " Paris.\n\nThe United States has a population of ..."
    let (full, _) = run(&mut ctx, &prompt, &greedy(16));
    let at = full.find("United").expect("fixture continuation");
    let p = GenerateParams {
        stop: vec!["nope".into(), "United".into()],
        ..greedy(64)
    };
    let (text, stats) = run(&mut ctx, &prompt, &p);
    assert_eq!(text, full[..at]);
    assert_eq!(stats.stop, StopReason::StopString(1));
    assert!(stats.n_generated < 16);
}

#[test]
fn prefix_reuse_gives_the_same_output_as_a_fresh_context() {
    let model = load_model(SMOLLM2);
    let tok = model.tokenizer();
    let first = tokenize_prompt(tok, "def fibonacci(n):\n");
    let second = tokenize_prompt(tok, "def fibonacci(n):\n    if n <= 1:\n");
    let mut warm = context(&model, 256, 512, 2);
    run(&mut warm, &first, &greedy(8));
    let (text_warm, stats_warm) = run(&mut warm, &second, &greedy(12));
    assert!(
        stats_warm.n_prompt_eval < second.len(),
        "the common prefix was not reused"
    );
    let mut fresh = context(&model, 256, 512, 2);
    let (text_fresh, stats_fresh) = run(&mut fresh, &second, &greedy(12));
    assert_eq!(stats_fresh.n_prompt_eval, second.len());
    assert_eq!(
        (text_warm, stats_warm.tokens),
        (text_fresh, stats_fresh.tokens)
    );
}

#[test]
fn context_full_and_prompt_too_long() {
    let model = load_model(SMOLLM2);
    let prompt = tokenize_prompt(model.tokenizer(), "Once upon a time");
    let mut ctx = context(&model, prompt.len() + 3, 512, 1);
    let (_, stats) = run(
        &mut ctx,
        &prompt,
        &GenerateParams {
            max_tokens: None,
            ignore_eos: true,
            ..greedy(0)
        },
    );
    assert_eq!(stats.stop, StopReason::ContextFull);
    // The prompt and three generated tokens fill the cache; a fourth is sampled from the last logits.
    assert_eq!(stats.n_generated, 4);
    let mut small = context(&model, 2, 512, 1);
    let err = generate(&mut small, &prompt, &greedy(4), &NoClock, &mut |_| true).unwrap_err();
    assert!(
        matches!(err, GenerateError::PromptTooLong { n_ctx: 2, .. }),
        "{err}"
    );
    assert!(matches!(
        generate(&mut small, &[], &greedy(4), &NoClock, &mut |_| true),
        Err(GenerateError::EmptyPrompt)
    ));
}

#[test]
fn seeded_sampling_is_reproducible_and_callback_can_cancel() {
    let model = load_model(SMOLLM2);
    let prompt = tokenize_prompt(model.tokenizer(), "Write a story about a dragon.");
    let p = |seed| GenerateParams {
        max_tokens: Some(24),
        sampling: SamplingParams {
            seed,
            temperature: 1.0,
            ..Default::default()
        },
        stop: vec![],
        ignore_eos: true,
        grammar: None,
    };
    let mut ctx = context(&model, 256, 512, 2);
    let (a, sa) = run(&mut ctx, &prompt, &p(7));
    let (b, sb) = run(&mut ctx, &prompt, &p(7));
    assert_eq!((a, &sa.tokens), (b, &sb.tokens));
    let (_, sc) = run(&mut ctx, &prompt, &p(8));
    assert_ne!(sa.tokens, sc.tokens);
    let mut calls = 0;
    let stats = generate(&mut ctx, &prompt, &p(7), &NoClock, &mut |_| {
        calls += 1;
        calls < 3
    })
    .unwrap();
    assert_eq!(stats.stop, StopReason::Cancelled);
}

#[test]
fn ends_at_end_of_generation_with_the_chat_template() {
    let model = load_model(SMOLLM2);
    let tok = model.tokenizer();
    let template = model
        .chat_template()
        .unwrap()
        .expect("SmolLM2 has a template");
    let msgs = [tessera_tokenizer::chat_template::ChatMessage::new(
        "user",
        "Say hello.",
    )];
    let prompt = tessera_runtime::generate::tokenize_chat(tok, &template, &msgs).unwrap();
    assert_eq!(
        prompt[0],
        tok.token_id("<|im_start|>").unwrap(),
        "special tokens are parsed"
    );
    let mut ctx = context(&model, 512, 512, 2);
    let (text, stats) = run(&mut ctx, &prompt, &greedy(200));
    match stats.stop {
        StopReason::EndOfGeneration(id) => assert!(tok.is_eog(id)),
        other => panic!("expected end of generation, got {other:?} after {text:?}"),
    }
    assert!(!text.contains("<|im_end|>"), "{text:?}");
    assert!(!text.trim().is_empty());
}
