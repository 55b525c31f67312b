//! The crate in headless Chromium (wasm-bindgen-test): the tokenizer and a short greedy
//! generation of SmolLM2, fetched from the URL in TESSERA_WASM_TEST_MODEL_URL at build time
//! (scripts/test-wasm-crate.sh serves it). The expected ids are llama.cpp's
//! (greedy_smollm2.jsonl, tokenize_smollm2.jsonl).
#![cfg(target_arch = "wasm32")]

use std::sync::Arc;

use tessera_core::sampling::SamplingParams;
use tessera_core::{Model, SequentialPool};
use tessera_runtime::generate::{GenerateParams, NoClock};
use tessera_wasm::errors::ErrorCode;
use tessera_wasm::loader::ModelLoader;
use tessera_wasm::options::LoadOptions;
use tessera_wasm::session::Session;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen(inline_js = "export async function fetch_bytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}")]
extern "C" {
    #[wasm_bindgen(catch)]
    async fn fetch_bytes(url: &str) -> Result<JsValue, JsValue>;
}

async fn smollm2() -> Arc<Model> {
    let Some(url) = option_env!("TESSERA_WASM_TEST_MODEL_URL") else {
        panic!("build with TESSERA_WASM_TEST_MODEL_URL set (scripts/test-wasm-crate.sh does)");
    };
    let bytes = js_sys::Uint8Array::new(&fetch_bytes(url).await.expect("fetch model")).to_vec();
    let mut loader = ModelLoader::new();
    loader.begin_shard(Some(bytes.len() as u64)).unwrap();
    for chunk in bytes.chunks(1 << 20) {
        loader.push(chunk).unwrap();
    }
    drop(bytes);
    Arc::new(Model::load(loader.finish().unwrap(), &mut |_| {}).unwrap())
}

#[wasm_bindgen_test]
async fn tokenizer_and_greedy_generation() {
    let model = smollm2().await;
    let tok = model.tokenizer();
    assert_eq!(
        tok.encode("The capital of France is", true, true),
        [504, 3575, 282, 4649, 314]
    );
    assert_eq!(tok.encode("<|im_start|>user", true, true)[0], 1);
    assert_eq!(
        tok.decode(&[504, 3575, 282, 4649, 314], false),
        "The capital of France is"
    );

    let options = LoadOptions {
        context_size: Some(128),
        batch_size: None,
    };
    let mut session = Session::new(model.clone(), &options, Arc::new(SequentialPool)).unwrap();
    let params = GenerateParams {
        max_tokens: Some(8),
        sampling: SamplingParams::greedy(),
        stop: vec![],
        ignore_eos: true,
        grammar: None,
    };
    session
        .begin(vec![504, 3575, 282, 4649, 314], params, &NoClock)
        .unwrap();
    let mut text = String::new();
    let stats = loop {
        let step = session.step(&NoClock).unwrap();
        text.push_str(&step.text);
        if let Some(stats) = step.finished {
            break stats;
        }
    };
    assert_eq!(stats.tokens, [7042, 30, 198, 198, 504, 1797, 1918, 553]);
    assert_eq!(text, tok.decode(&stats.tokens, false));
}

#[wasm_bindgen_test]
fn not_gguf_fails_on_the_first_chunk() {
    let mut loader = ModelLoader::new();
    let e = loader
        .push(b"<!doctype html><title>404</title>")
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidGguf);
}
