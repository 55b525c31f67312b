//! Arbitrary bytes as a request body through the runtime's request model, the way both hosts
//! parse one: JSON into the generation `Options`, the chat `messages` and a completion's
//! `Prompt` (from a JSON value, as the server does, and straight from the bytes), then every
//! check (`chat_messages`, `generate_params` with bounds drawn from the input, `spec_params`).
//! Nothing may panic, and a refusal always names a field that exists in the request or none.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde_json::Value;
use tessera_runtime::request::{self, Bounds, Message, Options, Prompt};

/// The bodies of the two generating endpoints, as the server reads their own fields.
#[derive(Deserialize)]
struct Chat {
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct Completion {
    prompt: Prompt,
}

fuzz_target!(|data: &[u8]| run(data));

fn run(data: &[u8]) {
    // Bounds from the first bytes: tiny and huge vocabularies and contexts, with or without a
    // default token limit (the browser's and the server's).
    let b = |i: usize| data.get(i).copied().unwrap_or(0) as usize;
    let bounds = Bounds {
        n_vocab: 1 + (b(0) << 10 | b(1)),
        n_ctx: 1 + (b(2) << 12 | b(3) << 4),
        default_seed: b(4) as u64,
        default_max_tokens: (b(5) & 1 == 1).then_some(b(5) >> 1),
    };
    let body = data.get(6..).unwrap_or(&[]);

    // Typed straight from the bytes (what a host parsing without a JSON value would do).
    if let Ok(options) =
        request::deserialize::<Options, _>(&mut serde_json::Deserializer::from_slice(body))
    {
        let _ = options.generate_params(&bounds);
    }
    let _ = request::deserialize::<Chat, _>(&mut serde_json::Deserializer::from_slice(body));

    // Through a JSON value, as the server parses a body today.
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    if let Ok(options) = request::deserialize::<Options, _>(&value) {
        check(options.generate_params(&bounds), &value);
        check(options.spec_params(), &value);
        let _ = options.check_supported();
    }
    if let Ok(chat) = request::deserialize::<Chat, _>(&value) {
        if let Ok(messages) = request::chat_messages(&chat.messages) {
            assert_eq!(messages.len(), chat.messages.len());
        }
    }
    if let Some(messages) = value.get("messages") {
        let _ = request::deserialize_field::<Vec<Message>, _>("messages", messages);
    }
    // (serde also reads a struct from an array of its fields in order: `[[1, 2]]`.)
    if let Ok(Completion {
        prompt: Prompt::Tokens(ids),
    }) = request::deserialize(&value)
    {
        let given = value.get("prompt").or_else(|| value.get(0));
        assert!(given
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() == ids.len()));
    }
}

/// A refusal names one of the request's fields (or an element of one), or none.
fn check<T>(result: Result<T, request::RequestError>, value: &Value) {
    let Err(e) = result else { return };
    assert!(!e.message.is_empty());
    if !value.is_object() {
        return; // fields given in order in an array have no names
    }
    let root = e.field.split(['[', '.']).next().unwrap_or("");
    let aliases = ["max_completion_tokens", "n_predict"];
    assert!(
        root.is_empty()
            || value.get(root).is_some()
            || (root == "max_tokens" && aliases.iter().any(|a| value.get(a).is_some())),
        "error names {:?}, not in the request: {}",
        e.field,
        e.message
    );
}
