//! Shared helpers for the tokenizer and chat-template tests: where models and fixtures are,
//! and loading a model's tokenizer.
#![allow(dead_code)]

use std::path::PathBuf;

use engine::tokenizer::Tokenizer;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn models_dir() -> PathBuf {
    std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("models"))
}

pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("TESSERA_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/fixtures"))
}

/// The model's GGUF header. Panics (fails the test) with instructions when the model is missing.
pub fn header(model: &str) -> gguf::Header {
    let path = models_dir().join(model);
    assert!(
        path.exists(),
        "test model {} is missing: run scripts/fetch-models.sh (or set TESSERA_MODELS)",
        path.display()
    );
    let file = gguf::GgufFile::open(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    file.header().clone()
}

pub fn tokenizer(model: &str) -> Tokenizer {
    Tokenizer::from_gguf(&header(model)).unwrap_or_else(|e| panic!("tokenizer of {model}: {e}"))
}

pub struct Case {
    pub text: String,
    pub ids: Vec<u32>,
    pub ids_no_parse_special: Vec<u32>,
}

/// The lines of a `tokenize_*.jsonl` fixture.
pub fn cases(file: &str) -> Vec<Case> {
    let path = fixtures_dir().join(file);
    let data = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "fixture {} unreadable ({e}); set TESSERA_FIXTURES",
            path.display()
        )
    });
    data.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("fixture line is JSON");
            let ids = |k: &str| -> Vec<u32> {
                v[k].as_array()
                    .expect("id list")
                    .iter()
                    .map(|x| x.as_u64().expect("id") as u32)
                    .collect()
            };
            Case {
                text: v["text"].as_str().expect("text").to_owned(),
                ids: ids("ids"),
                ids_no_parse_special: ids("ids_no_parse_special"),
            }
        })
        .collect()
}
