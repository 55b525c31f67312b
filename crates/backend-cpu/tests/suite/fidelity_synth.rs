//! Every architecture on `tools/synth_gguf.py`'s small random models against llama.cpp
//! (`tests/fixtures/synth.jsonl`): the greedy continuation of each prompt, token for token, and
//! the top-10 logprobs of its last position. The models are f16, so the architecture, not the
//! quantization, is what is compared; their logits are spread (std ~10), so a wrong rope mode,
//! bias or norm changes the tokens within a few positions.

use tessera_testkit::*;

/// Measured: llama (rope base 10000) is bit-exact; the others are within 0.023 (qwen2).
/// The same llama model with a rope base of 50000 or 1e6 is not bit-exact either (0.006,
/// 0.009), though rope's powf/cosf/sinf give glibc's bits: the residual lies elsewhere.
/// Greedy runs agree token for token.
const LOGPROB_TOLERANCE: f64 = 0.03;

fn check(arch: &str) {
    let (model, cases) = synth_cases(arch);
    let mut ctx = context(&model, 256, 256, 2);
    let failures = synth_mismatches(&mut ctx, &cases, LOGPROB_TOLERANCE);
    assert!(failures.is_empty(), "{arch}: {failures:#?}");
}

#[test]
fn llama_matches_llama_cpp() {
    check("llama");
}

#[test]
fn qwen2_matches_llama_cpp() {
    check("qwen2");
}

#[test]
fn qwen3_matches_llama_cpp() {
    check("qwen3");
}

/// Sliding-window layers with their own rope base and no rope scaling, a global layer with
/// linear scaling x8 (as Gemma 3 4B and larger), final soft-capping off.
#[test]
fn gemma3_matches_llama_cpp() {
    check("gemma3");
}

/// Soft-capped attention scores and final logits, a sliding window on every other layer.
#[test]
fn gemma2_matches_llama_cpp() {
    check("gemma2");
}

/// Llama 3.1's rope scaling: `rope_freqs.weight` divides each pair's angle.
#[test]
fn llama3_matches_llama_cpp() {
    check("llama3");
}

/// Fused q/k/v and gate/up projections (split by `slice`), q scaled before attention.
#[test]
fn phi3_matches_llama_cpp() {
    check("phi3");
}

/// A softmax router choosing 2 of 8 experts, weights normalised; the experts' matmuls over the
/// chosen experts only.
#[test]
fn qwen3moe_matches_llama_cpp() {
    check("qwen3moe");
}

/// The same weights with each expert's gate and up fused (`ffn_gate_up_exps`): llama.cpp's
/// qwen3moe does not load that tensor, so its output on the unfused twin is the reference.
#[test]
fn qwen3moe_fused_gate_up_matches_llama_cpp() {
    check("qwen3moe-fused");
}

/// A dense block, then experts with a sigmoid router, a selection bias that chooses but does
/// not weigh, weights normalised and scaled, and a shared expert.
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
