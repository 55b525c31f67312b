//! Test support shared by Tessera's crates: where the test models (`scripts/fetch-models.sh`)
//! and llama.cpp's reference outputs (`tests/fixtures/`) are, loading them, fixture readers,
//! and a thread pool on rayon's global threads; [`AsyncCpuBackend`], a backend double whose
//! steps are pending once before they complete; [`CountedCpuBackend`], which counts forward passes
//! and the sequences per batch. Native only: the wasm tests fetch what they
//! need.
#![cfg(not(target_arch = "wasm32"))]

mod async_backend;
mod counted_backend;
pub mod gpu_errors;
#[cfg(test)]
mod structure;

pub use async_backend::AsyncCpuBackend;
pub use counted_backend::{BatchCounts, CountedCpuBackend};

use std::path::PathBuf;
use std::sync::Arc;

use tessera_backend_cpu::CpuBackend;
use tessera_core::{Context, ContextParams, Model, ThreadPool};
use tessera_tokenizer::Tokenizer;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn models_dir() -> PathBuf {
    std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("models"))
}

/// llama.cpp's reference outputs, in the repository (`tests/fixtures/README.md` says how each
/// file was made); `TESSERA_FIXTURES` points elsewhere (e.g. an independent reference set).
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("TESSERA_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("tests/fixtures"))
}

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";

/// Loads a test model; fails (never skips) when it is missing.
pub fn load_model(file: &str) -> Arc<Model> {
    let path = models_dir().join(file);
    assert!(
        path.exists(),
        "test model {} is missing: run scripts/fetch-models.sh (or set TESSERA_MODELS)",
        path.display()
    );
    let gguf = tessera_gguf::GgufFile::open(&path).expect("open model");
    Arc::new(Model::load(Arc::new(gguf), &mut |_| {}).expect("load model"))
}

/// Reports `self.0` threads; runs tasks on rayon's global pool.
pub struct RayonPool(pub usize);

impl ThreadPool for RayonPool {
    fn n_threads(&self) -> usize {
        self.0
    }
    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        use rayon::prelude::*;
        (0..n_tasks).into_par_iter().for_each(task);
    }
}

pub fn pool(n: usize) -> Arc<dyn ThreadPool> {
    Arc::new(RayonPool(n))
}

/// A context on the CPU backend with `threads` rayon threads.
pub fn context(model: &Arc<Model>, n_ctx: usize, n_batch: usize, threads: usize) -> Context {
    Context::new(
        model.clone(),
        ContextParams { n_ctx, n_batch },
        Box::new(CpuBackend::new(pool(threads))),
    )
    .expect("context")
}

/// [`context`] with every weight in its file layout and ggml's kernels (no repacking): the
/// arithmetic of llama.cpp's plain (`_norepack`) reference outputs.
pub fn plain_context(model: &Arc<Model>, n_ctx: usize, n_batch: usize, threads: usize) -> Context {
    let mut backend = CpuBackend::new(pool(threads));
    backend.set_repack(false);
    Context::new(
        model.clone(),
        ContextParams { n_ctx, n_batch },
        Box::new(backend),
    )
    .expect("context")
}

/// A context of `n_seq` sequences (`n_ctx` positions each) on the CPU backend with `threads`
/// rayon threads.
pub fn multi_context(
    model: &Arc<Model>,
    n_ctx: usize,
    n_batch: usize,
    threads: usize,
    n_seq: usize,
) -> Context {
    Context::with_sequences(
        model.clone(),
        ContextParams { n_ctx, n_batch },
        n_seq,
        Box::new(CpuBackend::new(pool(threads))),
    )
    .expect("context")
}

/// The model's GGUF header. Fails the test with instructions when the model is missing.
pub fn header(model: &str) -> tessera_gguf::Header {
    let path = models_dir().join(model);
    assert!(
        path.exists(),
        "test model {} is missing: run scripts/fetch-models.sh (or set TESSERA_MODELS)",
        path.display()
    );
    let file = tessera_gguf::GgufFile::open(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    file.header().clone()
}

pub fn tokenizer(model: &str) -> Tokenizer {
    Tokenizer::from_gguf(&header(model)).unwrap_or_else(|e| panic!("tokenizer of {model}: {e}"))
}

/// One line of a `tokenize_*.jsonl` fixture.
pub struct TokenizeCase {
    pub text: String,
    pub ids: Vec<u32>,
    pub ids_no_parse_special: Vec<u32>,
}

/// The lines of a `tokenize_*.jsonl` fixture.
pub fn tokenize_cases(file: &str) -> Vec<TokenizeCase> {
    fixture(file)
        .iter()
        .map(|v| TokenizeCase {
            text: v["text"].as_str().expect("text").to_owned(),
            ids: ids(&v["ids"]),
            ids_no_parse_special: ids(&v["ids_no_parse_special"]),
        })
        .collect()
}

/// Lines of a JSONL fixture.
pub fn fixture(name: &str) -> Vec<serde_json::Value> {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {}: {e} (set TESSERA_FIXTURES)", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("fixture line"))
        .collect()
}

pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

/// Index of the largest logit (lowest index on ties), as greedy sampling.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// log-softmax of one row, in f64.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let m = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    let z: f64 = logits.iter().map(|&x| (x as f64 - m).exp()).sum();
    let lz = m + z.ln();
    logits.iter().map(|&x| x as f64 - lz).collect()
}

/// Indices of the k largest logits, largest first (lowest index on ties).
pub fn top_k(logits: &[f32], k: usize) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        logits[b as usize]
            .partial_cmp(&logits[a as usize])
            .unwrap()
            .then(a.cmp(&b))
    });
    idx.truncate(k);
    idx
}

/// Greedy continuation of `prompt` for `n` tokens (decoding one token at a time).
pub fn greedy(ctx: &mut Context, prompt: &[u32], n: usize) -> Vec<u32> {
    ctx.clear();
    ctx.decode(prompt, false).expect("decode prompt");
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = argmax(ctx.logits());
        out.push(t);
        ctx.decode(&[t], false).expect("decode");
    }
    out
}

/// One model of `tools/synth_gguf.py` (small, random weights, SmolLM2's tokenizer): written on
/// first use into `models/synth/` (the same arguments always give the same file) and loaded.
/// Fails (never skips) when it cannot be made.
pub fn synth_model(arch: &str, seed: u64, ty: &str) -> Arc<Model> {
    // Tests run on several threads: one writer at a time, each file written once.
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let dir = models_dir().join("synth");
    let path = dir.join(format!("{arch}-{seed}-{ty}.gguf"));
    {
        let _guard = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        if !path.exists() {
            std::fs::create_dir_all(&dir).expect("models/synth");
            let tmp = path.with_extension("tmp");
            let status = std::process::Command::new("python3")
                .arg(repo_root().join("tools/synth_gguf.py"))
                .args([
                    "--arch",
                    arch,
                    "--seed",
                    &seed.to_string(),
                    "--type",
                    ty,
                    "--out",
                ])
                .arg(&tmp)
                .arg("--tokenizer")
                .arg(models_dir().join(SMOLLM2))
                .status()
                .expect("python3 tools/synth_gguf.py (scripts/setup.sh installs gguf and numpy)");
            assert!(status.success(), "synth_gguf.py --arch {arch} failed");
            std::fs::rename(&tmp, &path).expect("rename the synthetic model");
        }
    }
    let gguf = tessera_gguf::GgufFile::open(&path).expect("open synthetic model");
    Arc::new(Model::load(Arc::new(gguf), &mut |_| {}).expect("load synthetic model"))
}

/// The lines of `tests/fixtures/synth.jsonl` for one architecture of `tools/synth_gguf.py`
/// (`scripts/make-synth-fixtures.py` writes them from llama.cpp), with the model they describe.
pub fn synth_cases(arch: &str) -> (Arc<Model>, Vec<serde_json::Value>) {
    let cases: Vec<_> = fixture("synth.jsonl")
        .into_iter()
        .filter(|c| c["arch"] == arch)
        .collect();
    assert!(!cases.is_empty(), "no {arch} lines in synth.jsonl");
    let (seed, ty) = (
        cases[0]["seed"].as_u64().unwrap(),
        cases[0]["type"].as_str().unwrap(),
    );
    (synth_model(arch, seed, ty), cases)
}

/// How `ctx` (on the model of [`synth_cases`]) differs from llama.cpp on `cases`: a line per
/// top-10 logprob further than `tolerance` and per greedy continuation (picked by the
/// backend, as [`Context::decode_greedy`] does) that parts from llama.cpp's.
pub fn synth_mismatches(
    ctx: &mut Context,
    cases: &[serde_json::Value],
    tolerance: f64,
) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let prompt = ids(&case["prompt_ids"]);
        let want = ids(&case["gen_ids"]);
        ctx.clear();
        ctx.decode(&prompt, false).unwrap();
        let lp = log_softmax(ctx.logits());
        for e in case["top10"].as_array().unwrap() {
            let id = e["id"].as_u64().unwrap() as usize;
            let d = (lp[id] - e["logprob"].as_f64().unwrap()).abs();
            if d > tolerance {
                failures.push(format!(
                    "{:?}: logprob of {id} off by {d:.4}",
                    case["prompt"]
                ));
            }
        }
        ctx.clear();
        let mut got = ctx.decode_greedy(&prompt, false).unwrap();
        while got.len() < want.len() {
            let next = ctx.decode_greedy(&got[got.len() - 1..], false).unwrap();
            got.push(next[0]);
        }
        if let Some(at) = got.iter().zip(&want).position(|(a, b)| a != b) {
            failures.push(format!("{:?}: greedy parts at token {at}", case["prompt"]));
        }
    }
    failures
}

/// The logprob tolerance of a synthetic model with quantized matrices (0 for the f16 ones).
/// Their matmuls round the activations to 8 bits, as llama.cpp's do, so the small differences
/// an architecture's f16 model shows (rope, attention) flip some roundings and grow: measured
/// 0.092 on `gpt-oss-mxfp4` (CPU), whose MXFP4 kernel itself gives llama.cpp's bits.
pub fn quantized_tolerance(arch: &str) -> f64 {
    if arch.ends_with("-mxfp4") {
        0.15
    } else {
        0.0
    }
}

/// One test per architecture of `tests/fixtures/synth.jsonl`, each calling `$check(arch)`
/// (the backend's comparison with llama.cpp): the one list both backends' suites run.
#[macro_export]
macro_rules! synth_architecture_tests {
    ($check:path) => {
        $crate::synth_architecture_tests!($check;
            llama_matches_llama_cpp => "llama",
            // Llama 3.1's rope scaling: `rope_freqs.weight` divides each pair's angle.
            llama3_matches_llama_cpp => "llama3",
            // YaRN: interpolated and extrapolated angles blended by the ramp, magnitudes scaled.
            llama_yarn_matches_llama_cpp => "llama-yarn",
            // q/k/v biases.
            qwen2_matches_llama_cpp => "qwen2",
            qwen3_matches_llama_cpp => "qwen3",
            // Fused q/k/v and gate/up projections (split by `slice`), q scaled before attention.
            phi3_matches_llama_cpp => "phi3",
            // Phi-3.5's LongRoPE: the long factors and the attention factor.
            phi3_longrope_matches_llama_cpp => "phi3-longrope",
            // Soft-capped attention scores and final logits, a window on every other layer.
            gemma2_matches_llama_cpp => "gemma2",
            // Local layers with their own rope base and no rope scaling, a global one with
            // linear scaling x8 (as Gemma 3 4B and larger).
            gemma3_matches_llama_cpp => "gemma3",
            // A softmax router choosing 2 of 8 experts, weights normalised.
            qwen3moe_matches_llama_cpp => "qwen3moe",
            // The same weights with each expert's gate and up fused (`ffn_gate_up_exps`):
            // llama.cpp's qwen3moe does not load it, so its unfused twin is the reference.
            qwen3moe_fused_gate_up_matches_llama_cpp => "qwen3moe-fused",
            // A dense block, then a sigmoid router with a selection bias that chooses but does
            // not weigh, weights normalised and scaled, and a shared expert.
            dots1_matches_llama_cpp => "dots1",
            // Attention sinks, q/k/v/o biases, a window on the even layers, YaRN; a biased
            // router whose top-k precedes the softmax, experts with biases and swiglu_oai.
            gpt_oss_matches_llama_cpp => "gpt-oss",
            // The same weights with each expert's gate and up, and their biases, fused:
            // llama.cpp's gpt-oss does not load it, so its unfused twin is the reference.
            gpt_oss_fused_gate_up_matches_llama_cpp => "gpt-oss-fused",
            // The experts in MXFP4, as the released files store them (activations rounded to
            // Q8_0 for their matmuls, as llama.cpp does).
            gpt_oss_mxfp4_matches_llama_cpp => "gpt-oss-mxfp4",
        );
    };
    ($check:path; $($name:ident => $arch:literal,)*) => {
        $(
            #[test]
            fn $name() {
                $check($arch);
            }
        )*
    };
}
