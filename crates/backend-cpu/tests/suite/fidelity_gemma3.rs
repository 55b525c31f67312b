//! Gemma 3 270M (Q4_K_M) against llama.cpp's outputs. llama.cpp itself moves by up to ~0.4
//! logprob with its weight repacking on this model (fixtures README), and so does Tessera's
//! (its repacked kernels round differently from ggml's). Tessera as it runs (weights repacked)
//! is held to the fixtures' tolerances: first 8 greedy tokens identical to both references,
//! top-10 within 0.45 / 0.35, forced-decoding top-1 agreement ≥ 95 %. With repacking off
//! (`plain_context`: file layouts, ggml's kernels) it matches the plain (`_norepack`) reference
//! exactly: 64-token greedy continuations identical, top-10 logprobs equal to the printed
//! digits. How: docs/backend-cpu.md, "Fidelity".

use tessera_testkit::*;

/// Sensitive to last-bit details: it failed ("The capital of France is" parted at token 5)
/// while the attention's running sum was rounded twice (`S*ms + vs` without the fused
/// multiply-add GCC uses in ggml); it holds again since. See docs/backend-cpu.md.
#[test]
fn first_greedy_tokens_match_llama_cpp() {
    let model = load_model(GEMMA3);
    let mut ctx = context(&model, 256, 512, 2);
    for file in ["greedy_gemma3.jsonl", "greedy_gemma3_norepack.jsonl"] {
        for case in fixture(file) {
            let prompt = ids(&case["prompt_ids"]);
            let want = ids(&case["gen_ids"]);
            let got = greedy(&mut ctx, &prompt, 8);
            assert_eq!(got, want[..8], "{file} {:?}", case["prompt"]);
        }
    }
}

/// What the browser build is held to (it repacks too, with the same bits): the first 32
/// greedy tokens of the plain reference. Measured with the f32 tiled attention: 64, 53 and 64
/// tokens of the three prompts agree (with ggml's f16 attention on repacked weights: 11, 64, 10).
#[test]
fn repacked_greedy_follows_the_plain_reference_for_32_tokens() {
    let model = load_model(GEMMA3);
    let mut ctx = context(&model, 256, 512, 2);
    for case in fixture("greedy_gemma3_norepack.jsonl") {
        let prompt = ids(&case["prompt_ids"]);
        let want = ids(&case["gen_ids"]);
        assert_eq!(
            greedy(&mut ctx, &prompt, 32),
            want[..32],
            "{:?}",
            case["prompt"]
        );
    }
}

#[test]
fn greedy_continuations_equal_the_plain_reference() {
    let model = load_model(GEMMA3);
    let mut ctx = plain_context(&model, 256, 512, 2);
    for case in fixture("greedy_gemma3_norepack.jsonl") {
        let prompt = ids(&case["prompt_ids"]);
        let want = ids(&case["gen_ids"]);
        let got = greedy(&mut ctx, &prompt, want.len());
        assert_eq!(got, want, "{:?}", case["prompt"]);
    }
}

#[test]
fn forced_decoding_top1_agreement_at_least_95_percent() {
    let model = load_model(GEMMA3);
    let mut ctx = context(&model, 256, 512, 2);
    let (mut agree, mut total) = (0usize, 0usize);
    for case in fixture("greedy_gemma3_norepack.jsonl") {
        let prompt = ids(&case["prompt_ids"]);
        let gen = ids(&case["gen_ids"]);
        // Feed prompt + continuation in one batch; position i predicts token i+1.
        let mut all = prompt.clone();
        all.extend_from_slice(&gen);
        ctx.clear();
        ctx.decode(&all[..all.len() - 1], true).unwrap();
        let n_vocab = model.n_vocab();
        let logits = ctx.all_logits();
        for (j, &want) in gen.iter().enumerate() {
            let pos = prompt.len() - 1 + j;
            total += 1;
            agree += (argmax(&logits[pos * n_vocab..(pos + 1) * n_vocab]) == want) as usize;
        }
    }
    let rate = agree as f64 / total as f64;
    eprintln!("forced-decoding top-1 agreement: {agree}/{total} = {rate:.3}");
    assert!(rate >= 0.95, "agreement {rate:.3} < 0.95");
}

/// Issue 3's bound on the plain (no-repack) reference.
#[test]
fn top10_logprobs_within_tolerance() {
    top10_within(&["logits_top10_gemma3_norepack.jsonl"], 0.35, true);
}

/// In fact equal to the plain reference's printed digits (6 decimals): every node matches the
/// reference build bit for bit (docs/backend-cpu.md, "Fidelity").
#[test]
fn top10_logprobs_equal_the_plain_reference() {
    top10_within(&["logits_top10_gemma3_norepack.jsonl"], 1e-4, false);
}

/// The repacked reference differs from llama.cpp's own plain one by up to 0.42 on this model
/// (one entry of "def add": we equal the plain reference there), so it gets a wider bound.
#[test]
fn top10_logprobs_near_the_repacked_reference() {
    top10_within(&["logits_top10_gemma3.jsonl"], 0.45, true);
}

/// `repacked`: Tessera's default CPU path, else file layouts and ggml's kernels.
fn top10_within(files: &[&str], tolerance: f64, repacked: bool) {
    let model = load_model(GEMMA3);
    let mut ctx = if repacked {
        context(&model, 256, 512, 2)
    } else {
        plain_context(&model, 256, 512, 2)
    };
    for &file in files {
        let mut worst = 0.0f64;
        for case in fixture(file) {
            let prompt = ids(&case["prompt_ids"]);
            ctx.clear();
            ctx.decode(&prompt, false).unwrap();
            let lp = log_softmax(ctx.logits());
            let top = case["top10"].as_array().unwrap();
            assert_eq!(
                argmax(ctx.logits()),
                top[0]["id"].as_u64().unwrap() as u32,
                "{file} {:?}: top-1 differs",
                case["prompt"]
            );
            for e in top {
                let id = e["id"].as_u64().unwrap() as usize;
                let d = (lp[id] - e["logprob"].as_f64().unwrap()).abs();
                worst = worst.max(d);
                assert!(
                    d < tolerance,
                    "{file} {:?} id {id}: off by {d:.6}",
                    case["prompt"]
                );
            }
        }
        eprintln!("{file}: largest top-10 logprob difference {worst:.6}");
    }
}
