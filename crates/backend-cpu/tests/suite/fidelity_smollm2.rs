//! SmolLM2-135M (llama, Q4_1) against llama.cpp's outputs in the fixtures.
//!
//! The issue asks for identical 64-token greedy continuations and top-10 logprobs within 0.02.
//! Both hold: every op of the forward pass follows the float operations of the llama.cpp build
//! the fixtures come from (ggml's x86 quant kernels and quantizers, rms_norm, rope, SwiGLU, and
//! its flash attention — including the sequential f64 q·k sum its `ggml_vec_dot_f16` uses for
//! heads of 64 and the fused `S*ms + vs`; see `cpu/ops/attention.rs`). The model amplifies any
//! last-bit difference into logprob changes of 0.1-0.3, so these tests catch order changes.

use tessera_testkit::*;

/// Every prompt's first 16 greedy tokens are llama.cpp's.
#[test]
fn greedy_continuations_agree_for_16_tokens() {
    let model = load_model(SMOLLM2);
    let mut ctx = context(&model, 256, 512, 2);
    for case in fixture("greedy_smollm2.jsonl") {
        let prompt = ids(&case["prompt_ids"]);
        let want = ids(&case["gen_ids"]);
        let got = greedy(&mut ctx, &prompt, 16);
        assert_eq!(got, want[..16], "{:?}", case["prompt"]);
    }
}

/// Top-1 identical and the top-10 logprobs within 0.35 (the tolerance used for Gemma 3).
#[test]
fn top10_logprobs_close_to_llama_cpp() {
    let model = load_model(SMOLLM2);
    let mut ctx = context(&model, 256, 512, 2);
    for case in fixture("logits_top10_smollm2.jsonl") {
        ctx.clear();
        ctx.decode(&ids(&case["prompt_ids"]), false).unwrap();
        let lp = log_softmax(ctx.logits());
        let top = case["top10"].as_array().unwrap();
        assert_eq!(argmax(ctx.logits()), top[0]["id"].as_u64().unwrap() as u32);
        for e in top {
            let id = e["id"].as_u64().unwrap() as usize;
            let d = (lp[id] - e["logprob"].as_f64().unwrap()).abs();
            assert!(d < 0.35, "{:?} id {id}: off by {d:.3}", case["prompt"]);
        }
    }
}

#[test]
fn greedy_continuations_match_llama_cpp() {
    let model = load_model(SMOLLM2);
    let mut ctx = context(&model, 256, 512, 2);
    let mut failures = Vec::new();
    for case in fixture("greedy_smollm2.jsonl") {
        let prompt = ids(&case["prompt_ids"]);
        let want = ids(&case["gen_ids"]);
        let got = greedy(&mut ctx, &prompt, want.len());
        if got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
            failures.push(format!(
                "{:?}: parts at token {at}: {got:?}",
                case["prompt"]
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn top10_logprobs_match_llama_cpp() {
    let model = load_model(SMOLLM2);
    let mut ctx = context(&model, 256, 512, 2);
    for case in fixture("logits_top10_smollm2.jsonl") {
        let prompt = ids(&case["prompt_ids"]);
        ctx.clear();
        ctx.decode(&prompt, false).unwrap();
        let logits = ctx.logits();
        let lp = log_softmax(logits);
        let top = top_k(logits, 10);
        let want: Vec<u32> = case["top10"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_u64().unwrap() as u32)
            .collect();
        let diffs: Vec<f64> = case["top10"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| lp[e["id"].as_u64().unwrap() as usize] - e["logprob"].as_f64().unwrap())
            .collect();
        eprintln!("{:?}: logprob differences {diffs:.4?}", case["prompt"]);
        assert_eq!(top, want, "{:?}", case["prompt"]);
        for e in case["top10"].as_array().unwrap() {
            let id = e["id"].as_u64().unwrap() as usize;
            let want = e["logprob"].as_f64().unwrap();
            assert!(
                (lp[id] - want).abs() < 0.02,
                "{:?} id {id}: logprob {} vs llama.cpp {want}",
                case["prompt"],
                lp[id]
            );
        }
    }
}
