//! End to end on the test models: a GPU backend (the WebGPU one here, the Vulkan one in its
//! crate's suite, which includes this file with its own `under_test`) against the CPU backend
//! and the llama.cpp fixtures.
//! - Forced decoding: the CPU backend's greedy continuation (256 tokens) is fed to the wgpu
//!   backend in one pass; its top-1 (sampled on the GPU) must agree at >= 99 % of positions.
//! - Greedy 32 tokens after a fixture prompt, sampled on the GPU, identical to the fixture
//!   (SmolLM2; for Gemma 3 llama.cpp's plain reference: its repacked one parts from it after
//!   ~10 tokens, see the fixtures' README).

use std::path::PathBuf;
use std::sync::Arc;

use tessera_core::{Context, ContextParams, Model};

fn env_dir(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(default))
}

fn load(file: &str) -> Arc<Model> {
    let path = env_dir("TESSERA_MODELS", "../../models").join(file);
    assert!(
        path.exists(),
        "test model {} is missing: run scripts/fetch-models.sh",
        path.display()
    );
    let gguf = tessera_gguf::GgufFile::open(&path).expect("open model");
    Arc::new(Model::load(Arc::new(gguf), &mut |_| {}).expect("load model"))
}

fn fixture(name: &str) -> Vec<serde_json::Value> {
    let path = tessera_testkit::fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {}: {e} (set TESSERA_FIXTURES)", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("fixture line"))
        .collect()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn params(n_ctx: usize, n_batch: usize) -> ContextParams {
    ContextParams { n_ctx, n_batch }
}

fn cpu_context(model: &Arc<Model>, n_ctx: usize) -> Context {
    // The CPU backend on two threads (the suite's machines have two cores).
    let pool = Arc::new(Pool2);
    Context::new(
        model.clone(),
        ContextParams {
            n_ctx,
            n_batch: 256,
        },
        Box::new(tessera_backend_cpu::CpuBackend::new(pool)),
    )
    .unwrap()
}

struct Pool2;
impl tessera_core::ThreadPool for Pool2 {
    fn n_threads(&self) -> usize {
        2
    }
    fn run(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        std::thread::scope(|s| {
            let h = s.spawn(|| (n / 2..n).for_each(task));
            (0..n / 2).for_each(task);
            h.join().unwrap();
        });
    }
}

fn gpu_context(model: &Arc<Model>, n_ctx: usize, n_batch: usize) -> Context {
    let backend = crate::under_test::model_backend(model);
    Context::new(model.clone(), params(n_ctx, n_batch), backend).unwrap()
}

/// What forced decoding found: agreeing positions, positions, and for each disagreement the
/// CPU's logit gap between its choice and the GPU's (a near tie when small).
struct Forced {
    agree: usize,
    n: usize,
    miss_gaps: Vec<f32>,
}

impl Forced {
    fn rate(&self) -> f64 {
        self.agree as f64 / self.n as f64
    }

    /// ≥ 99 % agreement. A short run (CI's, on a slow software GPU) cannot express 99 %: one
    /// miss in 32 is 97 %; there every miss must instead be a near tie on the CPU (a gap under
    /// 0.5 in logits), i.e. a last-bits difference, not a wrong computation.
    fn passes(&self) -> bool {
        self.rate() >= 0.99 || (self.n < 100 && self.miss_gaps.iter().all(|&g| g < 0.5))
    }
}

/// CPU greedy continuation of `prompt` (n tokens), then the agreement of the GPU's top-1 with
/// it when the whole sequence is fed at once.
fn forced_decoding(file: &str, prompt: &[u32], n: usize) -> Forced {
    let model = load(file);
    let n_ctx = prompt.len() + n + 1;
    let mut cpu = cpu_context(&model, n_ctx);
    let mut seq = cpu.decode_greedy(prompt, false).unwrap();
    while seq.len() < n {
        let next = cpu.decode_greedy(&seq[seq.len() - 1..], false).unwrap();
        seq.push(next[0]);
    }
    let mut all = prompt.to_vec();
    all.extend_from_slice(&seq[..n - 1]);
    // Micro-batches of up to 64 (an all-logits batch of Gemma 3 must fit lavapipe's 128 MiB
    // bindings); the logits do not depend on the split (tests/batch_independence.rs).
    let mut gpu = gpu_context(&model, n_ctx, 64);
    let got = gpu.decode_greedy(&all, true).unwrap();
    // got[i] predicts token i + 1; the CPU's predictions start after the prompt.
    let misses: Vec<usize> = (0..n)
        .filter(|&j| got[prompt.len() - 1 + j] != seq[j])
        .collect();
    let mut miss_gaps = Vec::new();
    if !misses.is_empty() {
        let n_vocab = model.n_vocab();
        cpu.clear();
        cpu.decode(&all, true).unwrap();
        let logits = cpu.all_logits();
        for &j in &misses {
            let row = &logits[(prompt.len() - 1 + j) * n_vocab..][..n_vocab];
            let gap = row[seq[j] as usize] - row[got[prompt.len() - 1 + j] as usize];
            eprintln!(
                "{file}: position {j}: CPU {} vs GPU {} (CPU logit gap {gap:.4})",
                seq[j],
                got[prompt.len() - 1 + j]
            );
            miss_gaps.push(gap);
        }
    }
    let f = Forced {
        agree: n - misses.len(),
        n,
        miss_gaps,
    };
    eprintln!(
        "{file}: forced-decoding top-1 agreement {}/{n} = {:.4}",
        f.agree,
        f.rate()
    );
    f
}

/// Fixture prompts the greedy tests run (`TESSERA_WGPU_PROMPTS`, default all): software GPUs
/// are slow, so CI may run fewer.
fn fixture_prompts() -> usize {
    std::env::var("TESSERA_WGPU_PROMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Positions of the forced-decoding tests (`TESSERA_WGPU_FORCED_TOKENS`, default 256).
fn forced_tokens() -> usize {
    std::env::var("TESSERA_WGPU_FORCED_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn first_fixture_prompt(name: &str) -> Vec<u32> {
    ids(&fixture(name)[0]["prompt_ids"])
}

#[test]
fn smollm2_forced_decoding_agreement_at_least_99_percent() {
    let prompt = first_fixture_prompt("greedy_smollm2.jsonl");
    let f = forced_decoding("SmolLM2-135M-Instruct.Q4_1.gguf", &prompt, forced_tokens());
    assert!(
        f.passes(),
        "agreement {:.4} < 0.99 (gaps {:?})",
        f.rate(),
        f.miss_gaps
    );
}

#[test]
fn gemma3_forced_decoding_agreement_at_least_99_percent() {
    let prompt = first_fixture_prompt("greedy_gemma3.jsonl");
    let f = forced_decoding("gemma-3-270m-q4_k_m.gguf", &prompt, forced_tokens());
    assert!(
        f.passes(),
        "agreement {:.4} < 0.99 (gaps {:?})",
        f.rate(),
        f.miss_gaps
    );
}

/// Greedy generation with sampling on the GPU, one submission and 4 bytes read per token.
fn greedy(ctx: &mut Context, prompt: &[u32], n: usize) -> Vec<u32> {
    ctx.clear();
    let mut out = ctx.decode_greedy(prompt, false).unwrap();
    while out.len() < n {
        let next = ctx.decode_greedy(&out[out.len() - 1..], false).unwrap();
        out.push(next[0]);
    }
    out
}

#[test]
fn smollm2_greedy_32_matches_the_fixtures() {
    let model = load("SmolLM2-135M-Instruct.Q4_1.gguf");
    let mut ctx = gpu_context(&model, 256, 512);
    for case in fixture("greedy_smollm2.jsonl")
        .iter()
        .take(fixture_prompts())
    {
        let want = ids(&case["gen_ids"]);
        let got = greedy(&mut ctx, &ids(&case["prompt_ids"]), 32);
        assert_eq!(got, want[..32], "{:?}", case["prompt"]);
    }
}

/// Gemma 3 against llama.cpp's plain (`_norepack`) reference, which the CPU backend matches
/// exactly: 32 greedy tokens identical on every prompt. (Its repacked reference parts from the
/// plain one at token 10-11 on two prompts, fixtures README; reported for information.)
#[test]
fn gemma3_greedy_32_matches_the_plain_fixtures() {
    let model = load("gemma-3-270m-q4_k_m.gguf");
    let mut ctx = gpu_context(&model, 256, 512);
    let repacked = fixture("greedy_gemma3.jsonl");
    for (case, repacked) in fixture("greedy_gemma3_norepack.jsonl")
        .iter()
        .zip(&repacked)
        .take(fixture_prompts())
    {
        let want = ids(&case["gen_ids"]);
        let got = greedy(&mut ctx, &ids(&case["prompt_ids"]), 32);
        let same = got
            .iter()
            .zip(&ids(&repacked["gen_ids"]))
            .take_while(|(a, b)| a == b)
            .count();
        eprintln!(
            "gemma3 {:?}: first {same} of 32 tokens as llama.cpp's repacked reference",
            case["prompt"]
        );
        assert_eq!(got, want[..32], "{:?}", case["prompt"]);
    }
}

/// Sampling on the GPU on a real model's logits: for each seed, the token `decode_sampled`
/// draws on the device equals the CPU reference sampler applied to the same step's logits read
/// back from the same backend. The CPU backend's logits are sampled too, for information only:
/// they differ from the GPU's in their last bits, which can move a flat draw to another token.
#[test]
fn smollm2_gpu_sampling_matches_the_cpu_reference_on_its_logits() {
    use tessera_core::sampling::{Sampler, SamplingParams};
    let model = load("SmolLM2-135M-Instruct.Q4_1.gguf");
    let prompt = first_fixture_prompt("greedy_smollm2.jsonl");
    let (head, last) = prompt.split_at(prompt.len() - 1);
    let mut gpu = gpu_context(&model, 256, 512);
    let mut cpu = cpu_context(&model, 256);
    gpu.decode(head, false).unwrap();
    cpu.decode(head, false).unwrap();
    cpu.decode(last, false).unwrap();
    let n_vocab = model.n_vocab();
    let mut same_as_cpu_backend = 0;
    // Two draws (lavapipe takes ~4 s each); locally 6 seeds all agreed.
    let seeds = 2;
    for seed in 0..seeds {
        // llama.cpp's defaults, then a flat draw over the whole vocabulary.
        let params = if seed % 2 == 0 {
            SamplingParams {
                seed,
                ..SamplingParams::default()
            }
        } else {
            SamplingParams {
                seed,
                temperature: 3.0,
                top_k: 0,
                top_p: 0.99,
                min_p: 0.0,
                ..SamplingParams::default()
            }
        };
        let step = Sampler::new(params).unwrap().device_step();
        gpu.truncate(head.len());
        let on_device = gpu.decode_sampled(last, &step).unwrap().unwrap();
        gpu.truncate(head.len());
        gpu.decode(last, false).unwrap();
        let reference = step.sample_cpu(&gpu.logits()[..n_vocab]).unwrap();
        let cpu_token = step.sample_cpu(&cpu.logits()[..n_vocab]).unwrap();
        eprintln!(
            "seed {seed} u {:.4}: GPU {on_device}, reference {reference}, CPU backend {cpu_token}",
            step.u
        );
        assert_eq!(on_device, reference, "seed {seed}");
        same_as_cpu_backend += usize::from(cpu_token == on_device);
    }
    eprintln!("{same_as_cpu_backend} of {seeds} draws equal to the CPU backend's");
}
