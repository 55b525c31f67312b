//! The endpoints' answers: shapes, and greedy text equal to the runtime's own generation (what
//! `tessera run --chat` prints with the same settings).

use serde_json::{json, Value};
use tessera_core::sampling::SamplingParams;
use tessera_runtime::generate::{generate, tokenize_chat, GenerateParams, NoClock};
use tessera_tokenizer::chat_template::ChatMessage;

use crate::client::{get, post};
use crate::{server, N_CTX_SLOT};

/// The runtime's greedy answer to `messages` (the same path as `tessera run --chat`).
fn runtime_answer(messages: &[ChatMessage], max_tokens: usize) -> String {
    let model = tessera_testkit::load_model(tessera_testkit::SMOLLM2);
    let tok = model.tokenizer();
    let template = model.chat_template().unwrap().unwrap();
    let prompt = tokenize_chat(tok, &template, messages).unwrap();
    let mut ctx = tessera_testkit::context(&model, N_CTX_SLOT, 512, 2);
    let params = GenerateParams {
        max_tokens: Some(max_tokens),
        sampling: SamplingParams::greedy(),
        stop: Vec::new(),
        ignore_eos: false,
        grammar: None,
    };
    let mut text = String::new();
    generate(&mut ctx, &prompt, &params, &NoClock, &mut |t| {
        text.push_str(t);
        true
    })
    .unwrap();
    text
}

pub fn chat_body(user: &str, max_tokens: usize, stream: bool) -> String {
    json!({
        "model": "anything",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": user},
        ],
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": stream,
    })
    .to_string()
}

#[test]
fn health_and_models() {
    let addr = server();
    let h = get(addr, "/health");
    assert_eq!((h.status, h.json()), (200, json!({"status": "ok"})));
    let m = get(addr, "/v1/models").json();
    assert_eq!(m["object"], "list");
    assert_eq!(m["data"][0]["id"], "smollm2");
    assert_eq!(m["data"][0]["status"]["value"], "loaded");
}

#[test]
fn greedy_chat_is_the_runtimes_text() {
    let addr = server();
    let r = post(
        addr,
        "/v1/chat/completions",
        &chat_body("What is the capital of France?", 24, false),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let want = runtime_answer(
        &[
            ChatMessage::new("system", "You are a helpful assistant."),
            ChatMessage::new("user", "What is the capital of France?"),
        ],
        24,
    );
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], want.as_str());
    // "length" after 24 tokens, or "stop" at an end-of-generation token before.
    let n = v["usage"]["completion_tokens"].as_u64().unwrap();
    let finish = if n == 24 { "length" } else { "stop" };
    assert_eq!(v["choices"][0]["finish_reason"], finish, "{v}");
    assert!(
        v["timings"]["predicted_per_second"].as_f64().unwrap() > 0.0,
        "{v}"
    );
}

#[test]
fn a_stream_is_the_same_text_in_chunks() {
    let addr = server();
    let whole = post(
        addr,
        "/v1/chat/completions",
        &chat_body("Name three colors.", 20, false),
    )
    .json();
    let r = post(
        addr,
        "/v1/chat/completions",
        &chat_body("Name three colors.", 20, true),
    );
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let data = r.sse_data();
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        text,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    let last = chunks.last().unwrap();
    assert_eq!(last["object"], "chat.completion.chunk");
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(last["usage"]["completion_tokens"], 20);
    assert!(last["timings"]["prompt_n"].as_u64().unwrap() > 0);
}

#[test]
fn content_parts_are_joined() {
    let addr = server();
    let parts = json!({
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is the capital "}, {"type": "text", "text": "of Italy?"}]}],
        "temperature": 0, "max_tokens": 8,
    });
    let plain = json!({
        "messages": [{"role": "user", "content": "What is the capital of Italy?"}],
        "temperature": 0, "max_tokens": 8,
    });
    let a = post(addr, "/v1/chat/completions", &parts.to_string()).json();
    let b = post(addr, "/v1/chat/completions", &plain.to_string()).json();
    assert_eq!(a["choices"][0]["message"], b["choices"][0]["message"]);
}

#[test]
fn completions_stop_strings_and_seeds() {
    let addr = server();
    let body = json!({"prompt": "The capital of France is", "temperature": 0, "max_tokens": 16});
    let v = post(addr, "/v1/completions", &body.to_string()).json();
    assert_eq!(v["object"], "text_completion");
    let text = v["choices"][0]["text"].as_str().unwrap().to_string();
    assert!(!text.is_empty());
    // A stop string cuts the same text where it first appears.
    let word = text.split_whitespace().nth(1).unwrap().to_string();
    let body = json!({"prompt": "The capital of France is", "temperature": 0, "max_tokens": 16, "stop": [word]});
    let cut = post(addr, "/v1/completions", &body.to_string()).json();
    assert_eq!(cut["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        cut["choices"][0]["text"].as_str().unwrap(),
        &text[..text.find(&word).unwrap()]
    );
    // Sampling with a seed repeats itself.
    let body =
        json!({"prompt": "Once upon a time", "temperature": 1.0, "seed": 42, "max_tokens": 12});
    let a = post(addr, "/v1/completions", &body.to_string()).json();
    let b = post(addr, "/v1/completions", &body.to_string()).json();
    assert_eq!(a["choices"][0]["text"], b["choices"][0]["text"]);
}

#[test]
fn logit_bias_bans_a_token() {
    let addr = server();
    let tok = post(addr, "/tokenize", &json!({"content": " Paris"}).to_string()).json();
    let paris = tok["tokens"][0].as_u64().unwrap();
    let body = |bias: Value| {
        json!({"prompt": "The capital of France is", "temperature": 0, "max_tokens": 4, "logit_bias": bias})
            .to_string()
    };
    let free = post(addr, "/v1/completions", &body(json!({}))).json();
    assert!(
        free["choices"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with(" Paris"),
        "{free}"
    );
    let banned = post(
        addr,
        "/v1/completions",
        &body(json!({paris.to_string(): -100})),
    )
    .json();
    assert!(
        !banned["choices"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with(" Paris"),
        "{banned}"
    );
}

#[test]
fn tokenize_and_detokenize_round_trip() {
    let addr = server();
    let t = post(
        addr,
        "/tokenize",
        &json!({"content": "Hello world", "with_pieces": true}).to_string(),
    )
    .json();
    let pieces = t["tokens"].as_array().unwrap();
    assert_eq!(pieces[0]["piece"], "Hello");
    let ids: Vec<u64> = pieces.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    let d = post(addr, "/detokenize", &json!({"tokens": ids}).to_string()).json();
    assert_eq!(d["content"], "Hello world");
}

#[test]
fn speculative_requests_give_the_plain_text_with_draft_statistics() {
    let addr = server();
    let prompt = "a b c d e f g a b c d e f g a b c d e f g a b c d e f g a b";
    let body = |spec: Value| {
        json!({"prompt": prompt, "temperature": 0, "max_tokens": 40, "ignore_eos": true, "speculative": spec})
            .to_string()
    };
    let plain = post(addr, "/v1/completions", &body(Value::Null)).json();
    let spec = post(
        addr,
        "/v1/completions",
        &body(json!({"type": "ngram-simple", "ngram_size_n": 3, "draft_max": 8})),
    )
    .json();
    assert_eq!(spec["choices"][0]["text"], plain["choices"][0]["text"]);
    assert!(plain["timings"].get("draft_n").is_none());
    let (drafted, accepted) = (
        spec["timings"]["draft_n"].as_u64().unwrap(),
        spec["timings"]["draft_n_accepted"].as_u64().unwrap(),
    );
    assert!(accepted > 0 && drafted >= accepted, "{spec}");
    for bad in [
        json!({"type": "draft"}),
        json!({"type": "telepathy"}),
        json!({"type": "ngram-simple", "ngram_size_n": 0}),
    ] {
        let r = post(addr, "/v1/completions", &body(bad.clone()));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}
