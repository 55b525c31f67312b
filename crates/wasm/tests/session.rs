//! The browser surface's logic, natively: chunked loading, error codes, and step-wise
//! generation giving exactly what `engine::generate::generate` gives.

use std::path::PathBuf;
use std::sync::Arc;

use engine::generate::{generate, tokenize_prompt, GenerateParams, NoClock, StopReason};
use engine::sampling::SamplingParams;
use engine::{Model, SequentialPool};
use tessera_wasm::errors::ErrorCode;
use tessera_wasm::loader::ModelLoader;
use tessera_wasm::options::{GenerateOptions, LoadOptions};
use tessera_wasm::session::Session;

fn models_dir() -> PathBuf {
    std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"))
}

fn smollm2_bytes() -> Vec<u8> {
    let path = models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/fetch-models.sh or set TESSERA_MODELS)",
            path.display()
        )
    })
}

/// Loads through the chunked loader, the way the worker feeds a fetch body.
fn load_in_chunks(bytes: &[u8], chunk: usize) -> Arc<Model> {
    let mut loader = ModelLoader::new();
    loader.begin_shard(Some(bytes.len() as u64)).unwrap();
    for c in bytes.chunks(chunk) {
        loader.push(c).unwrap();
    }
    assert_eq!(loader.received(), bytes.len() as u64);
    let file = loader.finish().unwrap();
    Arc::new(Model::load(file, &mut |_| {}).unwrap())
}

fn session(model: &Arc<Model>) -> Session {
    let options = LoadOptions {
        context_size: Some(256),
        batch_size: None,
    };
    Session::new(model.clone(), &options, Arc::new(SequentialPool)).unwrap()
}

/// Runs a step-wise generation to its end; returns the text and the stats.
fn run_steps(
    s: &mut Session,
    prompt: Vec<u32>,
    params: GenerateParams,
) -> (String, engine::generate::GenerateStats) {
    s.begin(prompt, params, &NoClock).unwrap();
    let mut text = String::new();
    loop {
        let step = s.step(&NoClock).unwrap();
        text.push_str(&step.text);
        if let Some(stats) = step.finished {
            assert!(!s.is_generating());
            return (text, stats);
        }
    }
}

#[test]
fn steps_match_engine_generate_and_fixture() {
    let bytes = smollm2_bytes();
    let model = load_in_chunks(&bytes, 65_536 + 7);
    let prompt = tokenize_prompt(model.tokenizer(), "The capital of France is");
    assert_eq!(prompt, [504, 3575, 282, 4649, 314]);
    let params = GenerateParams {
        max_tokens: Some(32),
        sampling: SamplingParams::greedy(),
        stop: vec![],
        ignore_eos: true,
    };
    let mut s = session(&model);
    let (text, stats) = run_steps(&mut s, prompt.clone(), params.clone());

    let mut ctx = engine::Context::new(
        model.clone(),
        engine::ContextParams {
            n_ctx: 256,
            ..Default::default()
        },
    )
    .unwrap();
    let mut expected = String::new();
    let reference = generate(&mut ctx, &prompt, &params, &NoClock, &mut |t| {
        expected.push_str(t);
        true
    })
    .unwrap();
    assert_eq!(stats.tokens, reference.tokens);
    assert_eq!(text, expected);
    assert_eq!(stats.stop, StopReason::MaxTokens);
    // The first 16 are llama.cpp's (greedy_smollm2.jsonl, first prompt).
    assert_eq!(
        &stats.tokens[..16],
        &[7042, 30, 198, 198, 504, 1797, 1918, 553, 253, 2155, 282, 4723, 216, 35, 33, 33]
    );

    // A second request reuses the cached prompt prefix and gives the same tokens.
    let (again, stats2) = run_steps(&mut s, prompt, params);
    assert_eq!(stats2.n_prompt_eval, 1);
    assert_eq!(again, text);
}

#[test]
fn stop_strings_cancel_and_errors() {
    let model = load_in_chunks(&smollm2_bytes(), 1 << 20);
    let mut s = session(&model);
    let prompt = tokenize_prompt(model.tokenizer(), "The capital of France is");
    let options = GenerateOptions {
        max_tokens: Some(32),
        temperature: Some(0.0),
        stop: Some(tessera_wasm::options::StopOption::Many(vec![
            "zebra".into(),
            "\n\n".into(),
        ])),
        ..Default::default()
    };
    let (text, stats) = run_steps(&mut s, prompt.clone(), options.to_params().unwrap());
    // Greedy: " Paris.\n\nThe ..." stops before the blank line (stop string #1).
    assert_eq!(stats.stop, StopReason::StopString(1));
    assert_eq!(text, " Paris.");

    // Cancel after the prompt and one token.
    s.begin(prompt.clone(), options.to_params().unwrap(), &NoClock)
        .unwrap();
    s.step(&NoClock).unwrap();
    s.step(&NoClock).unwrap();
    let stats = s.cancel(&NoClock).unwrap();
    assert_eq!(stats.stop, StopReason::Cancelled);
    assert_eq!(stats.n_generated, 1);
    assert_eq!(s.step(&NoClock).unwrap_err().code, ErrorCode::InvalidState);

    let too_long = vec![504u32; 300];
    let e = s
        .begin(too_long, options.to_params().unwrap(), &NoClock)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ContextFull);
    let e = s
        .begin(vec![], options.to_params().unwrap(), &NoClock)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let e = s
        .begin(vec![u32::MAX], options.to_params().unwrap(), &NoClock)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let bad = GenerateOptions {
        top_p: Some(2.0),
        ..Default::default()
    };
    assert_eq!(
        bad.to_params().unwrap_err().code,
        ErrorCode::InvalidArgument
    );

    // Chat goes through the model's template (ChatML for SmolLM2).
    let ids = s
        .chat_prompt(&[engine::chat_template::ChatMessage::new("user", "Hi")])
        .unwrap();
    let text = model.tokenizer().decode(&ids, true);
    assert!(text.contains("<|im_start|>user\nHi<|im_end|>"), "{text:?}");
    assert!(text.ends_with("<|im_start|>assistant\n"), "{text:?}");
}

#[test]
fn corrupt_and_truncated_files_are_invalid_gguf() {
    // Not GGUF at all: rejected on the first chunk, before the rest would download.
    let mut loader = ModelLoader::new();
    loader.begin_shard(None).unwrap();
    let e = loader.push(b"<html>not found</html>").unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidGguf);

    // A real header whose data section is cut short: rejected when opened.
    let bytes = smollm2_bytes();
    let mut loader = ModelLoader::new();
    loader.push(&bytes[..bytes.len() / 2]).unwrap();
    let e = loader.finish().map(|_| ()).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidGguf);

    let e = ModelLoader::new().finish().map(|_| ()).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidGguf);

    // More than the wasm heap could ever hold is refused before allocating.
    let mut loader = ModelLoader::new();
    let e = loader.begin_shard(Some(u64::MAX)).unwrap_err();
    assert_eq!(e.code, ErrorCode::OutOfMemory);
}
