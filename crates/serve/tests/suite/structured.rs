//! Structured output over HTTP: OpenAI's `response_format` and llama-server's `json_schema` and
//! `grammar`, whole and streamed; grammars that cannot compile are 400s naming the reason.

use serde_json::{json, Value};

use crate::client::post;
use crate::server;

fn chat(extra: Value, stream: bool) -> Value {
    let mut body = json!({
        "messages": [{"role": "user", "content": "Describe a fictional person as JSON."}],
        "temperature": 0,
        "max_tokens": 96,
        "stream": stream,
    });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "role": {"enum": ["admin", "editor", "viewer"]},
        },
        "required": ["name", "age", "role"],
        "additionalProperties": false,
    })
}

fn assert_person(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert!(
        v["name"].as_str().is_some_and(|n| n.chars().count() <= 24),
        "{v}"
    );
    assert!(v["age"].as_u64().is_some_and(|a| a <= 120), "{v}");
    assert!(
        ["admin", "editor", "viewer"].contains(&v["role"].as_str().unwrap()),
        "{v}"
    );
    assert_eq!(v.as_object().unwrap().len(), 3, "{v}");
}

#[test]
fn response_format_json_schema_whole_and_streamed() {
    let addr = server();
    let format = json!({"response_format": {"type": "json_schema",
        "json_schema": {"name": "person", "schema": person_schema(), "strict": true}}});
    let r = post(
        addr,
        "/v1/chat/completions",
        &chat(format.clone(), false).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let whole = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert_person(&whole);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");

    let r = post(
        addr,
        "/v1/chat/completions",
        &chat(format, true).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let data = r.sse_data();
    let streamed: String = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(streamed, whole);
}

#[test]
fn llama_server_fields_and_json_mode() {
    let addr = server();
    let r = post(
        addr,
        "/v1/chat/completions",
        &chat(json!({"json_schema": person_schema()}), false).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_person(
        r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap(),
    );

    let r = post(
        addr,
        "/v1/chat/completions",
        &chat(json!({"response_format": {"type": "json_object"}}), false).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // JSON mode bounds no length: the small model may run to the token limit inside the
    // object, a prefix of one; an answer that ends is a whole object.
    let v = r.json();
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.starts_with('{'), "{text:?}");
    if v["choices"][0]["finish_reason"] == "stop" {
        let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        assert!(v.is_object(), "{v}");
    }

    let completion = json!({"prompt": "Is the sky blue? Answer:", "grammar": "start: \" yes\" | \" no\"", "temperature": 0});
    let r = post(addr, "/v1/completions", &completion.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let text = r.json()["choices"][0]["text"].as_str().unwrap().to_string();
    assert!(text == " yes" || text == " no", "{text:?}");
}

#[test]
fn grammars_that_cannot_compile_are_400s() {
    let addr = server();
    let cases = [
        (
            json!({"json_schema": {"type": "object", "unevaluatedProperties": false}}),
            "unevaluatedProperties",
        ),
        (
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "format": "ipv9"}}}}),
            "ipv9",
        ),
        (json!({"grammar": "start: foo"}), "foo"),
        (
            json!({"json_schema": person_schema(), "grammar": "start: \"x\""}),
            "both",
        ),
        (
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}),
            "schema",
        ),
    ];
    for (extra, needle) in cases {
        let r = post(
            addr,
            "/v1/chat/completions",
            &chat(extra.clone(), false).to_string(),
        );
        assert_eq!(r.status, 400, "{extra}: {}", r.body);
        assert!(r.body.contains(needle), "{extra}: {}", r.body);
    }
}
