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

/// `want[i]`'s logit minus `got[i]`'s after `prompt` and `want[..i]`, on `ctx` (how near a tie
/// the step where the two parted was).
fn margin(ctx: &mut Context, prompt: &[u32], want: &[u32], got: u32, i: usize) -> f32 {
    ctx.clear();
    let mut seq = prompt.to_vec();
    seq.extend_from_slice(&want[..i]);
    ctx.decode(&seq, false).unwrap();
    let logits = ctx.logits();
    logits[want[i] as usize] - logits[got as usize]
}

/// Every fixture prompt of both models (all of them, so one run reports every divergence);
/// where one parts from llama.cpp's tokens, the logit margin of llama.cpp's token over ours at
/// that step on the CPU backend and on CUDA says whether it was a near tie.
#[test]
fn greedy_32_matches_the_fixtures() {
    if !have_cuda() {
        return;
    }
    let mut failures = Vec::new();
    for (file, fx) in [
        (SMOLLM2, "greedy_smollm2.jsonl"),
        (GEMMA3, "greedy_gemma3_norepack.jsonl"),
    ] {
        let model = load_model(file);
        let mut ctx = cuda_context(&model, 256, 512);
        for case in fixture(fx) {
            let (prompt, want) = (ids(&case["prompt_ids"]), ids(&case["gen_ids"]));
            let got = greedy_on_device(&mut ctx, &prompt, 32);
            let Some(i) = (0..32).find(|&i| got[i] != want[i]) else {
                continue;
            };
            let mut cpu = tessera_testkit::context(&model, 256, 256, 16);
            let on_cpu = margin(&mut cpu, &prompt, &want, got[i], i);
            let on_gpu = margin(&mut ctx, &prompt, &want, got[i], i);
            let line = format!(
                "{file} {:?}: token {i} of 32 is {} where llama.cpp has {}; llama.cpp's leads \
                 by {on_cpu:.5} on the CPU backend, {on_gpu:.5} on CUDA",
                case["prompt"], got[i], want[i]
            );
            eprintln!("{line}");
            failures.push(line);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
