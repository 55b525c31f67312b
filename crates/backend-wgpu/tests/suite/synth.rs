//! Every architecture on the WebGPU backend against llama.cpp, on `tools/synth_gguf.py`'s
//! small random models (`tests/fixtures/synth.jsonl`): the greedy continuation of each prompt,
//! picked on the GPU, token for token, and the top-10 logprobs of the prompt's last position.

use tessera_backend_wgpu::WgpuBackend;
use tessera_core::{Context, ContextParams};
use tessera_testkit::*;

/// The GPU's f16 arithmetic and transcendental functions are the implementation's, so its
/// logprobs sit a little further from llama.cpp's than the CPU backend's.
const LOGPROB_TOLERANCE: f64 = 0.05;

fn check(arch: &str) {
    let (model, cases) = synth_cases(arch);
    let mut backend = WgpuBackend::new().expect("a WebGPU adapter (lavapipe in CI)");
    backend.upload_weights(model.weights()).unwrap();
    let params = ContextParams {
        n_ctx: 256,
        n_batch: 256,
    };
    let mut ctx = Context::new(model.clone(), params, Box::new(backend)).unwrap();
    let failures = synth_mismatches(&mut ctx, &cases, LOGPROB_TOLERANCE);
    assert!(failures.is_empty(), "{arch}: {failures:#?}");
}

#[test]
fn llama_matches_llama_cpp() {
    check("llama");
}

#[test]
fn llama3_matches_llama_cpp() {
    check("llama3");
}

#[test]
fn qwen2_matches_llama_cpp() {
    check("qwen2");
}

#[test]
fn qwen3_matches_llama_cpp() {
    check("qwen3");
}

#[test]
fn gemma2_matches_llama_cpp() {
    check("gemma2");
}

#[test]
fn gemma3_matches_llama_cpp() {
    check("gemma3");
}

/// Fused q/k/v and gate/up projections (split by `slice`), q scaled before attention.
#[test]
fn phi3_matches_llama_cpp() {
    check("phi3");
}

/// The router, the experts' matmul and the weighted sum on the GPU.
#[test]
fn qwen3moe_matches_llama_cpp() {
    check("qwen3moe");
}

#[test]
fn qwen3moe_fused_gate_up_matches_llama_cpp() {
    check("qwen3moe-fused");
}

/// Sigmoid gating with a selection bias, scaled weights, a shared expert.
#[test]
fn dots1_matches_llama_cpp() {
    check("dots1");
}

/// Phi-3.5's LongRoPE: the long factors (the context exceeds the original one) and the
/// attention factor on rope's cosines and sines.
#[test]
fn phi3_longrope_matches_llama_cpp() {
    check("phi3-longrope");
}

/// YaRN rope scaling: interpolated and extrapolated angles blended by the ramp, magnitudes
/// scaled.
#[test]
fn llama_yarn_matches_llama_cpp() {
    check("llama-yarn");
}
