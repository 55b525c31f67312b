//! What constrained decoding costs: per JSON schema, the time to compile it (it delays the
//! first token), and per generated token the time to compute the allowed tokens' mask and to
//! take the chosen token, beside the model's own decode time per token.
//! `cargo run --profile ci -p tessera-engine-dev --bin grammar-bench -- MODEL.gguf SUITE.json
//! [-n TOKENS] [-t THREADS] [-s SCHEMAS]` (SUITE: crates/runtime/tests/data/structured_suite.json;
//! prints one JSON line per schema, then the medians).

use std::time::Instant;

use tessera_core::sampling::{Sampler, SamplingParams};
use tessera_engine_dev::{load_model, usize_flag};
use tessera_runtime::constraint::{Constraint, Grammar, GrammarEnv};
use tessera_runtime::generate::tokenize_chat;
use tessera_tokenizer::chat_template::ChatMessage;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(suite)) = (args.first(), args.get(1)) else {
        return Err(
            "usage: grammar-bench MODEL.gguf SUITE.json [-n TOKENS] [-t THREADS] [-s SCHEMAS]"
                .into(),
        );
    };
    let n_tokens = usize_flag(&args, "-n", 64);
    let threads = usize_flag(&args, "-t", 2);
    let model = load_model(path)?;
    let suite: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(suite)?)?;
    let schemas = suite["schemas"]
        .as_array()
        .ok_or("the suite has no schemas")?;
    let n_schemas = usize_flag(&args, "-s", schemas.len()).min(schemas.len());
    let started = Instant::now();
    let env = GrammarEnv::for_model(&model)?;
    let env_s = started.elapsed().as_secs_f64();
    let template = model
        .chat_template()?
        .ok_or("the model has no chat template")?;
    let mut ctx = tessera_testkit::context(&model, 1024, 512, threads);
    let (mut compile_ms, mut mask_share, mut mask_us, mut decode_us) =
        (vec![], vec![], vec![], vec![]);
    for case in &schemas[..n_schemas] {
        let grammar = Grammar::JsonSchema(case["schema"].clone());
        let t = Instant::now();
        let mut constraint = Constraint::new(&env, &grammar)?;
        let compile = t.elapsed().as_secs_f64() * 1e3;
        let prompt = tokenize_chat(
            model.tokenizer(),
            &template,
            &[ChatMessage::new(
                "user",
                case["prompt"].as_str().unwrap_or(""),
            )],
        )?;
        ctx.clear();
        ctx.decode(&prompt, false)?;
        let mut sampler = Sampler::new(SamplingParams::greedy())?;
        let (mut grammar_s, mut model_s, mut n) = (0.0, 0.0, 0);
        while n < n_tokens && !constraint.is_done() {
            let t = Instant::now();
            let allowed = constraint.allowed()?;
            let token = sampler.sample_allowed(ctx.logits(), Some(&allowed))?;
            constraint.commit(token)?;
            grammar_s += t.elapsed().as_secs_f64();
            if model.tokenizer().is_eog(token) {
                break;
            }
            let t = Instant::now();
            ctx.decode(&[token], false)?;
            model_s += t.elapsed().as_secs_f64();
            n += 1;
        }
        let per_mask = grammar_s / n.max(1) as f64 * 1e6;
        let per_decode = model_s / n.max(1) as f64 * 1e6;
        println!(
            "{}",
            serde_json::json!({"id": case["id"], "tokens": n, "compile_ms": compile,
                "mask_commit_us": per_mask, "decode_us": per_decode, "share": per_mask / per_decode})
        );
        compile_ms.push(compile);
        mask_us.push(per_mask);
        decode_us.push(per_decode);
        mask_share.push(per_mask / per_decode);
    }
    let worst_compile = compile_ms.iter().copied().fold(0.0, f64::max);
    println!(
        "{}",
        serde_json::json!({"summary": true, "schemas": n_schemas, "grammar_env_s": env_s,
            "compile_ms_median": median(compile_ms), "compile_ms_max": worst_compile,
            "mask_commit_us_median": median(mask_us), "decode_us_median": median(decode_us),
            "share_median": median(mask_share.clone()),
            "share_max": mask_share.iter().copied().fold(0.0, f64::max)})
    );
    Ok(())
}
