//! SmolLM2-135M (llama, Q4_1) against llama.cpp's outputs in the fixtures: greedy
//! continuations identical, top-10 ids identical and log-probabilities within 0.02.

mod common;
use common::*;

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
