//! Always valid: every answer to the structured-output suite (tests/data/structured_suite.json:
//! objects, required and optional keys, enums, const, arrays with bounds, tuples, patterns,
//! formats, number ranges, `$ref`/`$defs`, anyOf/oneOf/allOf, nullable, top-level scalars)
//! follows its schema, on both test models, greedy and sampled at temperature 1. A validator
//! other than the grammar engine judges: Python's `jsonschema` (scripts/validate-json-outputs.py,
//! with format checks).

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use tessera_core::sampling::SamplingParams;
use tessera_runtime::constraint::Grammar;
use tessera_runtime::generate::{generate, tokenize_chat, GenerateParams, NoClock, StopReason};
use tessera_testkit::{context, load_model, GEMMA3, SMOLLM2};
use tessera_tokenizer::chat_template::ChatMessage;

/// Greedy, then two seeds at temperature 1.
const RUNS: [(f32, u64); 3] = [(0.0, 0), (1.0, 1), (1.0, 2)];

/// Every schema bounds its answer (string lengths, item counts, number ranges) well within this.
const MAX_TOKENS: usize = 256;

#[test]
fn every_answer_follows_its_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let suite_path = root.join("tests/data/structured_suite.json");
    let suite: Value =
        serde_json::from_str(&std::fs::read_to_string(&suite_path).unwrap()).unwrap();
    let schemas = suite["schemas"].as_array().unwrap();
    assert!(
        schemas.len() >= 50,
        "the suite has {} schemas",
        schemas.len()
    );
    let mut lines = Vec::new();
    let mut unfinished = Vec::new();
    for file in [SMOLLM2, GEMMA3] {
        let model = load_model(file);
        let template = model.chat_template().unwrap().unwrap();
        let mut ctx = context(&model, 1024, 512, 2);
        for case in schemas {
            let id = case["id"].as_str().unwrap();
            let messages = [ChatMessage::new("user", case["prompt"].as_str().unwrap())];
            let prompt = tokenize_chat(model.tokenizer(), &template, &messages).unwrap();
            for (temperature, seed) in RUNS {
                let params = GenerateParams {
                    max_tokens: Some(MAX_TOKENS),
                    sampling: SamplingParams {
                        temperature,
                        seed,
                        ..SamplingParams::default()
                    },
                    grammar: Some(Grammar::JsonSchema(case["schema"].clone())),
                    ..GenerateParams::default()
                };
                let mut output = String::new();
                let stats = generate(&mut ctx, &prompt, &params, &NoClock, &mut |t| {
                    output.push_str(t);
                    true
                })
                .unwrap_or_else(|e| panic!("{file} {id}: {e}"));
                if matches!(stats.stop, StopReason::MaxTokens | StopReason::ContextFull) {
                    unfinished.push(format!("{file} {id} seed {seed}: {output:?}"));
                }
                lines.push(json!({"id": id, "model": file, "temperature": temperature, "seed": seed, "output": output}));
            }
        }
    }
    let out = std::env::temp_dir().join(format!("tessera-structured-{}.jsonl", std::process::id()));
    let mut f = std::fs::File::create(&out).unwrap();
    for l in &lines {
        writeln!(f, "{l}").unwrap();
    }
    drop(f);
    let script = root.join("../../scripts/validate-json-outputs.py");
    let run = Command::new("python3")
        .arg(&script)
        .arg("validate")
        .arg(&out)
        .arg("--suite")
        .arg(&suite_path)
        .output()
        .expect("python3 runs (scripts/setup.sh installs jsonschema)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    eprintln!("{report}");
    assert!(
        run.status.success(),
        "answers that do not validate:\n{report}"
    );
    assert!(
        unfinished.is_empty(),
        "answers cut by the token limit:\n{}",
        unfinished.join("\n")
    );
    std::fs::remove_file(&out).ok();
}
