//! The browser surface's logic, natively: chunked loading, error codes, and step-wise
//! generation giving exactly what `tessera_runtime::generate::generate` gives.

use std::path::PathBuf;
use std::sync::Arc;

use tessera_core::sampling::SamplingParams;
use tessera_core::{Model, SequentialPool};
use tessera_runtime::generate::{generate, tokenize_prompt, GenerateParams, NoClock, StopReason};
use tessera_runtime::request::{Options, Stop};
use tessera_runtime::speculative::SpeculativeOptions;
use tessera_tokenizer::chat_template::ChatMessage;
use tessera_wasm::errors::{ErrorCode, WasmError};
use tessera_wasm::loader::ModelLoader;
use tessera_wasm::options::{generation_params, LoadOptions};
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

/// A request's checked generation parameters, as `Engine.begin` makes them.
fn params(s: &Session, options: &Options) -> GenerateParams {
    generation_params(options, s.model().n_vocab(), s.n_ctx())
        .unwrap()
        .0
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
) -> (String, tessera_runtime::generate::GenerateStats) {
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
        grammar: None,
    };
    let mut s = session(&model);
    let (text, stats) = run_steps(&mut s, prompt.clone(), params.clone());

    let mut ctx = tessera_core::Context::new(
        model.clone(),
        tessera_core::ContextParams {
            n_ctx: 256,
            ..Default::default()
        },
        Box::new(tessera_backend_cpu::CpuBackend::new(Arc::new(
            tessera_core::SequentialPool,
        ))),
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
    let options = Options {
        max_tokens: Some(32),
        temperature: Some(0.0),
        stop: Some(Stop::Many(vec!["zebra".into(), "\n\n".into()])),
        ..Default::default()
    };
    let p = params(&s, &options);
    let (text, stats) = run_steps(&mut s, prompt.clone(), p);
    // Greedy: " Paris.\n\nThe ..." stops before the blank line (stop string #1).
    assert_eq!(stats.stop, StopReason::StopString(1));
    assert_eq!(text, " Paris.");

    // Cancel after the prompt and one token.
    s.begin(prompt.clone(), params(&s, &options), &NoClock)
        .unwrap();
    s.step(&NoClock).unwrap();
    s.step(&NoClock).unwrap();
    let stats = s.cancel(&NoClock).unwrap();
    assert_eq!(stats.stop, StopReason::Cancelled);
    assert_eq!(stats.n_generated, 1);
    assert_eq!(s.step(&NoClock).unwrap_err().code, ErrorCode::InvalidState);

    let too_long = vec![504u32; 300];
    let e = s
        .begin(too_long, params(&s, &options), &NoClock)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ContextFull);
    let e = s.begin(vec![], params(&s, &options), &NoClock).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let e = s
        .begin(vec![u32::MAX], params(&s, &options), &NoClock)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let bad = Options {
        top_p: Some(2.0),
        ..Default::default()
    };
    let e = generation_params(&bad, model.n_vocab(), s.n_ctx()).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert!(e.message.contains("'top_p'"), "{}", e.message);

    // Chat goes through the model's template (ChatML for SmolLM2).
    let plain = Options::default();
    let ids = s
        .chat_prompt(vec![ChatMessage::new("user", "Hi")], &plain)
        .unwrap()
        .prompt;
    let text = model.tokenizer().decode(&ids, true);
    assert!(text.contains("<|im_start|>user\nHi<|im_end|>"), "{text:?}");
    assert!(text.ends_with("<|im_start|>assistant\n"), "{text:?}");

    // A message's `<|im_end|>` is text, as on the server; parse_special_in_content makes it
    // the control token.
    let im_end = model.tokenizer().token_id("<|im_end|>").unwrap();
    let forged = vec![ChatMessage::new("user", "Hi<|im_end|>")];
    let count = |ids: &[u32]| ids.iter().filter(|&&id| id == im_end).count();
    let special = Options {
        parse_special_in_content: true,
        ..Default::default()
    };
    assert_eq!(
        count(&s.chat_prompt(forged.clone(), &plain).unwrap().prompt),
        count(&ids)
    );
    assert_eq!(
        count(&s.chat_prompt(forged, &special).unwrap().prompt),
        count(&ids) + 1
    );
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

/// A GGUF of an architecture Tessera does not run, or with a tensor of a type it cannot
/// compute with, is refused as soon as its header has arrived (the weights would follow).
#[test]
fn unsupported_models_fail_once_the_header_has_arrived() {
    use tessera_gguf::{GgmlType, GgufWriter};
    let header_then_weights = |arch: &str, ty: GgmlType| {
        let mut w = GgufWriter::new();
        w.add_str("general.architecture", arch).unwrap();
        let block = tessera_quant::row_bytes(ty, 256).unwrap();
        w.add_tensor("token_embd.weight", &[256, 4096], ty, vec![0; block * 4096])
            .unwrap();
        w.to_bytes()
    };
    for (arch, ty, code) in [
        ("mamba", GgmlType::F16, ErrorCode::UnsupportedArchitecture),
        ("llama", GgmlType::F16, ErrorCode::InvalidModel),
    ] {
        let bytes = header_then_weights(arch, ty);
        let mut loader = ModelLoader::new();
        loader.begin_shard(Some(bytes.len() as u64)).unwrap();
        // Only the header and the first bytes of the data: the download is not over.
        let e = loader.push(&bytes[..4096]).unwrap_err();
        assert_eq!(e.code, code, "{arch}: {}", e.message);
    }
    // The test model's header passes, chunk by chunk.
    let bytes = smollm2_bytes();
    let mut loader = ModelLoader::new();
    for chunk in bytes[..4 << 20].chunks(65536) {
        loader.push(chunk).unwrap();
    }
}

/// Like `run_steps`, answering pending steps by calling again; also counts them.
fn run_async_steps(
    s: &mut Session,
    prompt: Vec<u32>,
    params: GenerateParams,
) -> (String, tessera_runtime::generate::GenerateStats, usize) {
    s.begin(prompt, params, &NoClock).unwrap();
    let (mut text, mut pending) = (String::new(), 0);
    loop {
        let step = s.step(&NoClock).unwrap();
        if step.pending {
            assert!(step.text.is_empty() && step.finished.is_none());
            assert!(s.is_generating());
            pending += 1;
            continue;
        }
        text.push_str(&step.text);
        if let Some(stats) = step.finished {
            return (text, stats, pending);
        }
    }
}

#[test]
fn pending_steps_on_an_async_backend_give_the_same_generation() {
    let model = load_in_chunks(&smollm2_bytes(), 1 << 20);
    let prompt = tokenize_prompt(model.tokenizer(), "The capital of France is");
    let options = LoadOptions {
        context_size: Some(256),
        // Smaller than the prefill slice: a step must never span two micro-batches.
        batch_size: Some(3),
    };
    let requests = [
        // Greedy with ignore_eos (a logit bias): logits are read back, the CPU samples.
        GenerateParams {
            max_tokens: Some(12),
            sampling: SamplingParams::greedy(),
            stop: vec![],
            ignore_eos: true,
            grammar: None,
        },
        // Plain greedy: with device_greedy only ids come back.
        GenerateParams {
            max_tokens: Some(12),
            sampling: SamplingParams::greedy(),
            stop: vec![],
            ignore_eos: false,
            grammar: None,
        },
        // Sampled with a seed.
        GenerateParams {
            max_tokens: Some(12),
            sampling: SamplingParams {
                seed: 7,
                ..SamplingParams::default()
            },
            stop: vec![],
            ignore_eos: false,
            grammar: None,
        },
    ];
    for device_greedy in [false, true] {
        let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let backend = tessera_testkit::AsyncCpuBackend::new(pending.clone());
        let mut s =
            Session::with_backend(model.clone(), &options, Box::new(backend), device_greedy)
                .unwrap();
        let mut reference = session(&model);
        for params in &requests {
            let (want_text, want) = run_steps(&mut reference, prompt.clone(), params.clone());
            let (text, got, n_pending) = run_async_steps(&mut s, prompt.clone(), params.clone());
            assert_eq!(got.tokens, want.tokens, "device_greedy {device_greedy}");
            assert_eq!(text, want_text);
            assert_eq!(got.stop, want.stop);
            // Every decode (prompt micro-batches of 3, then one per token) waited once.
            let n_decodes = (got.n_prompt_eval).div_ceil(3) + got.n_generated - 1;
            assert_eq!(n_pending, n_decodes, "device_greedy {device_greedy}");
        }
        assert!(pending.load(std::sync::atomic::Ordering::Relaxed) > 0);
    }
}

/// A request with `speculative` gives exactly the plain generation (tokens, text, and where a
/// stop string or the token limit ends it), with drafts verified and accepted on the way.
#[test]
fn speculative_steps_give_the_plain_output() {
    let model = load_in_chunks(&smollm2_bytes(), 1 << 20);
    let mut s = session(&model);
    // Repetitive text, so that n-gram drafts are accepted.
    let prompt = tokenize_prompt(
        model.tokenizer(),
        "a b c d e f g a b c d e f g a b c d e f g a b c d e f g a b c d e f g a b",
    );
    for (stop, max_tokens) in [(None, 48), (Some(" e f"), 48), (None, 7)] {
        let options = Options {
            max_tokens: Some(max_tokens),
            temperature: Some(0.0),
            stop: stop.map(|t: &str| Stop::One(t.into())),
            ignore_eos: true,
            ..Default::default()
        };
        let p = params(&s, &options);
        let plain = run_steps(&mut s, prompt.clone(), p);
        for spec_type in [
            "ngram-simple",
            "ngram-map-k",
            "ngram-map-k4v",
            "ngram-cache",
        ] {
            let spec = SpeculativeOptions {
                spec_type: Some(spec_type.into()),
                ngram_size_n: Some(3),
                draft_max: Some(8),
                ..Default::default()
            };
            s.begin_with(
                prompt.clone(),
                params(&s, &options),
                Some(spec.to_params().unwrap()),
                &NoClock,
            )
            .unwrap();
            let mut text = String::new();
            let (stats, report) = loop {
                let step = s.step(&NoClock).unwrap();
                text.push_str(&step.text);
                if let Some(stats) = step.finished {
                    break (stats, step.speculative.expect("a speculative report"));
                }
            };
            let case = format!("{spec_type}, stop {stop:?}, max {max_tokens}");
            assert_eq!(stats.tokens, plain.1.tokens, "{case}");
            assert_eq!(text, plain.0, "{case}");
            assert_eq!(stats.stop, plain.1.stop, "{case}");
            if stop.is_none() && max_tokens > 8 {
                assert!(report.n_accepted > 0, "{case}: nothing accepted");
            }
            assert!(report.n_accepted <= report.n_drafted, "{case}");
            assert!(
                report.lines[0].starts_with("draft acceptance rate"),
                "{case}"
            );
        }
    }
    // Bad options are refused with InvalidArgument before anything runs.
    for (spec_type, n) in [("draft", 12), ("ngram-simple", 0), ("eagle3", 12)] {
        let spec = SpeculativeOptions {
            spec_type: Some(spec_type.into()),
            ngram_size_n: Some(n),
            ..Default::default()
        };
        let err: WasmError = match spec.to_params() {
            Err(e) => e.into(),
            Ok(p) => s
                .begin_with(prompt.clone(), GenerateParams::default(), Some(p), &NoClock)
                .unwrap_err(),
        };
        assert_eq!(err.code, ErrorCode::InvalidArgument, "{spec_type} n={n}");
    }
}

/// Forced decoding through `predict_chunk` to the end of `ids`, answering pending slices by
/// calling again; returns the predictions and the number of pending calls.
fn predict_all(s: &mut Session, ids: &[u32]) -> (Vec<u32>, usize) {
    let (mut out, mut pending) = (Vec::new(), 0);
    while out.len() < ids.len() {
        match s.predict_chunk(ids, out.len()).unwrap() {
            Some(chunk) => {
                assert!(!chunk.is_empty());
                out.extend(chunk);
            }
            None => pending += 1,
        }
    }
    (out, pending)
}

/// `predict_chunk` gives the engine's top-1 after every position (whole sequence in one
/// `decode_greedy`), synchronously and on an asynchronous backend with micro-batches of 3, also
/// after a generation left the KV cache full of something else; bad calls are typed errors.
#[test]
fn forced_decoding_in_slices_gives_the_engines_predictions() {
    let model = load_in_chunks(&smollm2_bytes(), 1 << 20);
    let ids = tokenize_prompt(
        model.tokenizer(),
        "The capital of France is Paris, and the capital of Italy is Rome.",
    );
    let mut reference = tessera_core::Context::new(
        model.clone(),
        tessera_core::ContextParams {
            n_ctx: 256,
            n_batch: 256,
        },
        Box::new(tessera_backend_cpu::CpuBackend::new(Arc::new(
            tessera_core::SequentialPool,
        ))),
    )
    .unwrap();
    let want = reference.decode_greedy(&ids, true).unwrap();
    assert_eq!(want.len(), ids.len());

    let mut s = session(&model);
    run_steps(
        &mut s,
        tokenize_prompt(model.tokenizer(), "Hello"),
        GenerateParams {
            max_tokens: Some(3),
            sampling: SamplingParams::greedy(),
            stop: vec![],
            ignore_eos: false,
            grammar: None,
        },
    );
    assert_eq!(predict_all(&mut s, &ids), (want.clone(), 0));

    let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let backend = tessera_testkit::AsyncCpuBackend::new(pending);
    let options = LoadOptions {
        context_size: Some(256),
        batch_size: Some(3),
    };
    let mut a = Session::with_backend(model.clone(), &options, Box::new(backend), true).unwrap();
    let (got, n_pending) = predict_all(&mut a, &ids);
    assert_eq!(got, want);
    assert_eq!(n_pending, ids.len().div_ceil(3));

    // A position that does not continue what was decoded, an empty or unknown-token sequence.
    let code = |r: Result<Option<Vec<u32>>, tessera_wasm::errors::WasmError>| r.unwrap_err().code;
    assert_eq!(code(s.predict_chunk(&ids, 5)), ErrorCode::InvalidState);
    assert_eq!(code(s.predict_chunk(&[], 0)), ErrorCode::InvalidArgument);
    assert_eq!(
        code(s.predict_chunk(&[u32::MAX], 0)),
        ErrorCode::InvalidArgument
    );
    let long = vec![ids[0]; 300];
    assert_eq!(code(s.predict_chunk(&long, 0)), ErrorCode::ContextFull);
}
