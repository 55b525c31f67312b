//! End to end on the test models, on a CUDA device (skipped without one; required when
//! `TESSERA_REQUIRE_CUDA` is set, as scripts/gpu-check.sh does):
//! - forced decoding: the CPU backend's greedy continuation (256 tokens) fed to the CUDA
//!   backend in one pass; its top-1 (picked on the GPU) must agree at >= 99 % of positions;
//! - 32 greedy tokens after each fixture prompt, picked on the GPU, identical to llama.cpp's
//!   (SmolLM2; Gemma 3 against the plain, `_norepack`, reference the CPU backend matches);
//! - sampling on the GPU equal to the CPU reference sampler on the same logits.

use std::sync::Arc;

use tessera_backend_cuda::{libs, CudaBackend};
use tessera_core::sampling::{Sampler, SamplingParams};
use tessera_core::{Context, ContextParams, Model};
use tessera_testkit::{fixture, ids, load_model, GEMMA3, SMOLLM2};

/// Whether a CUDA device is here (see the module docs).
pub fn have_cuda() -> bool {
    let present =
        libs::driver_present() && tessera_backend_cuda::devices().is_ok_and(|d| !d.is_empty());
    assert!(
        present || std::env::var_os("TESSERA_REQUIRE_CUDA").is_none(),
        "TESSERA_REQUIRE_CUDA is set but no CUDA device answers"
    );
    if !present {
        eprintln!("skipped: no CUDA device");
    }
    present
}

fn cuda_context(model: &Arc<Model>, n_ctx: usize, n_batch: usize) -> Context {
    let mut backend = CudaBackend::new(0).expect("CUDA device 0");
    backend.upload_weights(model.weights()).unwrap();
    Context::new(
        model.clone(),
        ContextParams { n_ctx, n_batch },
        Box::new(backend),
    )
    .unwrap()
}

/// Greedy continuation picked on the device (4 bytes read back per token).
fn greedy_on_device(ctx: &mut Context, prompt: &[u32], n: usize) -> Vec<u32> {
    ctx.clear();
    let mut out = ctx.decode_greedy(prompt, false).unwrap();
    while out.len() < n {
        let next = ctx.decode_greedy(&out[out.len() - 1..], false).unwrap();
        out.push(next[0]);
    }
    out
}

/// The CPU's greedy continuation of the first fixture prompt (n tokens) against the CUDA
/// backend's top-1 over the whole sequence in one pass: the agreeing fraction.
fn forced_decoding(file: &str, fixture_name: &str, n: usize) -> f64 {
    let model = load_model(file);
    let prompt = ids(&fixture(fixture_name)[0]["prompt_ids"]);
    let n_ctx = prompt.len() + n + 1;
    let mut cpu = tessera_testkit::context(&model, n_ctx, 256, 16);
    let mut seq = cpu.decode_greedy(&prompt, false).unwrap();
    while seq.len() < n {
        let next = cpu.decode_greedy(&seq[seq.len() - 1..], false).unwrap();
        seq.push(next[0]);
    }
    let mut all = prompt.clone();
    all.extend_from_slice(&seq[..n - 1]);
    let mut gpu = cuda_context(&model, n_ctx, 512);
    let got = gpu.decode_greedy(&all, true).unwrap();
    let agree = (0..n)
        .filter(|&j| got[prompt.len() - 1 + j] == seq[j])
        .count();
    let rate = agree as f64 / n as f64;
    eprintln!("{file}: forced-decoding top-1 agreement {agree}/{n} = {rate:.4}");
    rate
}

#[test]
fn forced_decoding_agreement_at_least_99_percent() {
    if !have_cuda() {
        return;
    }
    for (file, fx) in [
        (SMOLLM2, "greedy_smollm2.jsonl"),
        (GEMMA3, "greedy_gemma3.jsonl"),
    ] {
        let rate = forced_decoding(file, fx, 256);
        assert!(rate >= 0.99, "{file}: agreement {rate:.4} < 0.99");
    }
}

#[test]
fn greedy_32_matches_the_fixtures() {
    if !have_cuda() {
        return;
    }
    for (file, fx) in [
        (SMOLLM2, "greedy_smollm2.jsonl"),
        (GEMMA3, "greedy_gemma3_norepack.jsonl"),
    ] {
        let model = load_model(file);
        let mut ctx = cuda_context(&model, 256, 512);
        for case in fixture(fx) {
            let want = ids(&case["gen_ids"]);
            let got = greedy_on_device(&mut ctx, &ids(&case["prompt_ids"]), 32);
            assert_eq!(got, want[..32], "{file} {:?}", case["prompt"]);
        }
    }
}

/// The token drawn on the device equals the CPU reference sampler on the same step's logits
/// read back from the same backend.
#[test]
fn sampling_on_the_gpu_matches_the_cpu_reference_on_its_logits() {
    if !have_cuda() {
        return;
    }
    let model = load_model(SMOLLM2);
    let prompt = ids(&fixture("greedy_smollm2.jsonl")[0]["prompt_ids"]);
    let (head, last) = prompt.split_at(prompt.len() - 1);
    let mut gpu = cuda_context(&model, 256, 512);
    gpu.decode(head, false).unwrap();
    let n_vocab = model.n_vocab();
    for seed in 0..6 {
        let params = match seed % 2 {
            0 => SamplingParams {
                seed,
                ..SamplingParams::default()
            },
            _ => SamplingParams {
                seed,
                temperature: 3.0,
                top_k: 0,
                top_p: 0.99,
                min_p: 0.0,
                ..SamplingParams::default()
            },
        };
        let step = Sampler::new(params).unwrap().device_step();
        gpu.truncate(head.len());
        let on_device = gpu.decode_sampled(last, &step).unwrap().unwrap();
        gpu.truncate(head.len());
        gpu.decode(last, false).unwrap();
        let reference = step.sample_cpu(&gpu.logits()[..n_vocab]).unwrap();
        assert_eq!(on_device, reference, "seed {seed}");
    }
}
