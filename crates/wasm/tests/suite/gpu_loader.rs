//! The browser's WebGPU loader, natively (lavapipe): a model streamed chunk by chunk straight
//! into GPU buffers generates llama.cpp's greedy tokens, and bad streams fail with the codes
//! the JS API documents, as early as they can be told.
#![cfg(feature = "webgpu")]

use std::path::PathBuf;
use std::sync::Arc;

use tessera_backend_wgpu::{Gpu, WgpuBackend};
use tessera_core::sampling::SamplingParams;
use tessera_core::{Context, ContextParams};
use tessera_gguf::{GgmlType, GgufWriter};
use tessera_runtime::generate::{generate, GenerateParams, NoClock};
use tessera_wasm::errors::{ErrorCode, WasmError};
use tessera_wasm::gpu_loader::GpuModelLoader;
use tessera_wasm::options::LoadOptions;
use tessera_wasm::session::Session;

fn gpu() -> Gpu {
    pollster::block_on(Gpu::new()).expect("a WebGPU adapter (lavapipe in CI)")
}

fn smollm2_bytes() -> Vec<u8> {
    let path = std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"))
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/fetch-models.sh)", path.display()))
}

const OPTIONS: LoadOptions = LoadOptions {
    context_size: Some(128),
    batch_size: None,
};

/// Pushes `bytes` in `chunk`-sized pieces; the first error, if any.
fn push_all(loader: &mut GpuModelLoader, bytes: &[u8], chunk: usize) -> Result<(), WasmError> {
    bytes.chunks(chunk).try_for_each(|c| loader.push(c))
}

/// `bytes` streamed into `gpu` in pieces of `chunk` bytes (the length announced up front or
/// not), as the browser's session on it.
fn streamed_session(gpu: &Gpu, bytes: &[u8], known_len: bool, chunk: usize) -> Session {
    let mut loader = GpuModelLoader::new(gpu.clone());
    loader
        .begin_shard(known_len.then_some(bytes.len() as u64))
        .unwrap();
    push_all(&mut loader, bytes, chunk).unwrap();
    assert_eq!(loader.received(), bytes.len() as u64);
    loader.finish(&OPTIONS).unwrap()
}

fn greedy_tokens(s: &mut Session, gpu: &Gpu, prompt: Vec<u32>, n: usize) -> Vec<u32> {
    let params = GenerateParams {
        max_tokens: Some(n),
        sampling: SamplingParams::greedy(),
        stop: vec![],
        ignore_eos: true,
        grammar: None,
    };
    generated_tokens(s, gpu, prompt, params)
}

/// The tokens of a session's generation on an asynchronous GPU backend, polling the device
/// while a step is pending (the worker awaits `readBack()` instead).
fn generated_tokens(
    s: &mut Session,
    gpu: &Gpu,
    prompt: Vec<u32>,
    params: GenerateParams,
) -> Vec<u32> {
    s.begin(prompt, params, &NoClock).unwrap();
    loop {
        let step = s.step(&NoClock).unwrap();
        if step.pending {
            let signal = gpu.read_back_signal();
            while !signal.is_ready() {
                gpu.wait().unwrap();
            }
            continue;
        }
        if let Some(stats) = step.finished {
            return stats.tokens;
        }
    }
}

#[test]
fn smollm2_streamed_into_the_gpu_generates_llama_cpps_tokens() {
    let bytes = smollm2_bytes();
    for known_len in [true, false] {
        let gpu = gpu();
        let mut s = streamed_session(&gpu, &bytes, known_len, (1 << 20) + 13);
        // llama.cpp's (greedy_smollm2.jsonl, first prompt); fewer where the buffers were made
        // lazily (the same bytes reach them: tests/weight_stream.rs in backend-wgpu).
        let want = [
            7042, 30, 198, 198, 504, 1797, 1918, 553, 253, 2155, 282, 4723, 216, 35, 33, 33,
        ];
        let n = if known_len { 16 } else { 4 };
        let tokens = greedy_tokens(&mut s, &gpu, vec![504, 3575, 282, 4649, 314], n);
        assert_eq!(tokens, want[..n], "length known: {known_len}");
    }
}

/// Sampling with options (temperature, top-k/top-p/min-p, a seed, a repeat penalty, banned
/// end-of-generation tokens) runs on the GPU in the browser's session too: each step reads back
/// a token, not the logits, and the tokens are those of the engine's own generation loop on a
/// (synchronous) GPU backend with the same seed.
#[test]
fn sampled_steps_read_back_token_ids_only_and_replay_the_engines_generation() {
    let bytes = smollm2_bytes();
    let gpu = gpu();
    let mut s = streamed_session(&gpu, &bytes, true, 1 << 20);
    let n_vocab = s.model().n_vocab();
    let params = GenerateParams {
        max_tokens: Some(12),
        sampling: SamplingParams {
            seed: 1234,
            repeat_penalty: 1.1,
            ..SamplingParams::default()
        },
        stop: vec![],
        ignore_eos: true,
        grammar: None,
    };
    let prompt = vec![504, 3575, 282, 4649, 314];
    let before = gpu.bytes_read_back();
    let got = generated_tokens(&mut s, &gpu, prompt.clone(), params.clone());
    let read = gpu.bytes_read_back() - before;
    assert_eq!(got.len(), 12);
    // 8 bytes (status, token) per sampled step; one row of logits would be 4 * n_vocab.
    assert!(
        read <= 8 * 12,
        "{read} bytes read back for 12 tokens (a row of logits: {} bytes)",
        4 * n_vocab
    );

    // The reference loads the file into memory (the streamed model's weights live on the GPU).
    let gguf = tessera_gguf::GgufFile::from_bytes(bytes).unwrap();
    let model = Arc::new(tessera_core::Model::load(Arc::new(gguf), &mut |_| {}).unwrap());
    let mut backend = WgpuBackend::new().unwrap();
    backend.upload_weights(model.weights()).unwrap();
    let ctx_params = ContextParams {
        n_ctx: 128,
        n_batch: 128,
    };
    let mut ctx = Context::new(model, ctx_params, Box::new(backend)).unwrap();
    let want = generate(&mut ctx, &prompt, &params, &NoClock, &mut |_| true).unwrap();
    assert_eq!(got, want.tokens);
}

fn code(r: Result<impl Sized, WasmError>) -> ErrorCode {
    r.err().expect("an error").code
}

/// A one-tensor model of type `ty`, architecture `arch`.
fn tiny(arch: &str, ty: GgmlType) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", arch).unwrap();
    let n = 256;
    let bytes = vec![0u8; (n / ty.block_size() * ty.type_size()) as usize];
    w.add_tensor("token_embd.weight", &[n], ty, bytes).unwrap();
    w.to_bytes()
}

#[test]
fn bad_streams_fail_with_their_codes_as_early_as_they_can() {
    let gpu = gpu();
    let smollm2 = smollm2_bytes();
    // Not GGUF: on the first chunk.
    let mut l = GpuModelLoader::new(gpu.clone());
    assert_eq!(
        code(l.push(b"this is not a model file")),
        ErrorCode::InvalidGguf
    );

    // A header promising more bytes than the announced length: once the header is in.
    let mut l = GpuModelLoader::new(gpu.clone());
    l.begin_shard(Some(smollm2.len() as u64 / 2)).unwrap();
    assert_eq!(
        code(push_all(&mut l, &smollm2[..8 << 20], 1 << 20)),
        ErrorCode::InvalidGguf
    );

    // Cut short: at the end of the stream.
    let mut l = GpuModelLoader::new(gpu.clone());
    push_all(&mut l, &smollm2[..smollm2.len() - 100], 1 << 20).unwrap();
    assert_eq!(code(l.finish(&OPTIONS)), ErrorCode::InvalidGguf);

    // A type the kernels lack (Q2_K): once the header is in.
    let mut l = GpuModelLoader::new(gpu.clone());
    assert_eq!(
        code(l.push(&tiny("llama", GgmlType::Q2_K))),
        ErrorCode::UnsupportedType
    );

    // An architecture the engine does not know: once the header is in.
    let mut l = GpuModelLoader::new(gpu.clone());
    assert_eq!(
        code(l.push(&tiny("mamba9", GgmlType::F32))),
        ErrorCode::UnsupportedArchitecture
    );

    // Nothing at all.
    assert_eq!(
        code(GpuModelLoader::new(gpu).finish(&OPTIONS)),
        ErrorCode::InvalidGguf
    );
}

/// Structured output on the browser's WebGPU session, whose steps otherwise pick on the device:
/// a grammar's steps read the logits back and pick on the CPU against the grammar's mask. A
/// sample of the structured-output suite's schemas (every sixth), greedy and sampled, and every
/// answer validates (Python's jsonschema, as the runtime's suite on the CPU).
#[test]
fn structured_answers_on_the_gpu_session_follow_their_schemas() {
    use tessera_runtime::constraint::Grammar;
    use tessera_runtime::generate::tokenize_chat;
    use tessera_tokenizer::chat_template::ChatMessage;

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let suite_path = root.join("crates/runtime/tests/data/structured_suite.json");
    let suite: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&suite_path).unwrap()).unwrap();
    let bytes = smollm2_bytes();
    let gpu = gpu();
    // Room for a prompt and a 200-token answer.
    let mut loader = GpuModelLoader::new(gpu.clone());
    loader.begin_shard(Some(bytes.len() as u64)).unwrap();
    push_all(&mut loader, &bytes, 1 << 20).unwrap();
    let options = LoadOptions {
        context_size: Some(512),
        batch_size: None,
    };
    let mut s = loader.finish(&options).unwrap();
    let model = s.model().clone();
    let template = model.chat_template().unwrap().unwrap();
    let mut lines = String::new();
    for case in suite["schemas"].as_array().unwrap().iter().step_by(6) {
        let messages = [ChatMessage::new("user", case["prompt"].as_str().unwrap())];
        let prompt = tokenize_chat(model.tokenizer(), &template, &messages).unwrap();
        for (temperature, seed) in [(0.0, 0), (1.0, 7)] {
            let params = GenerateParams {
                max_tokens: Some(200),
                sampling: SamplingParams {
                    temperature,
                    seed,
                    ..SamplingParams::default()
                },
                grammar: Some(Grammar::JsonSchema(case["schema"].clone())),
                ..GenerateParams::default()
            };
            let tokens = generated_tokens(&mut s, &gpu, prompt.clone(), params);
            assert!(tokens.len() < 200, "{}: cut at the token limit", case["id"]);
            let output = model.tokenizer().decode(&tokens, false);
            let line = serde_json::json!({"id": case["id"], "model": "SmolLM2 (WebGPU)", "output": output});
            lines.push_str(&format!("{line}\n"));
        }
    }
    let out = std::env::temp_dir().join(format!(
        "tessera-gpu-structured-{}.jsonl",
        std::process::id()
    ));
    std::fs::write(&out, lines).unwrap();
    let run = std::process::Command::new("python3")
        .arg(root.join("scripts/validate-json-outputs.py"))
        .args([
            "validate",
            out.to_str().unwrap(),
            "--suite",
            suite_path.to_str().unwrap(),
        ])
        .output()
        .expect("python3 runs (scripts/setup.sh installs jsonschema)");
    std::fs::remove_file(&out).ok();
    assert!(
        run.status.success(),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}
