//! Tool calls over HTTP on a model whose template knows no tools (SmolLM2: the generic JSON
//! answer, kept well formed by a grammar): whole and streamed answers, the history of calls
//! and results, and bad tool definitions as 400s.

use serde_json::{json, Value};

use crate::client::post;
use crate::server;

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
            "required": ["city"], "additionalProperties": false},
    }})
}

fn body(extra: Value, stream: bool) -> String {
    let mut b = json!({
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [weather_tool()],
        "temperature": 0,
        "max_tokens": 64,
        "stream": stream,
    });
    b.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    b.to_string()
}

/// The tool calls of a streamed answer, put together from its deltas.
fn streamed_calls(data: &[String]) -> (Vec<Value>, String, String) {
    let mut calls: Vec<Value> = Vec::new();
    let (mut content, mut finish) = (String::new(), String::new());
    for d in &data[..data.len() - 1] {
        let chunk: Value = serde_json::from_str(d).unwrap();
        let choice = &chunk["choices"][0];
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_owned();
        }
        content += choice["delta"]["content"].as_str().unwrap_or("");
        for c in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = c["index"].as_u64().unwrap() as usize;
            if i == calls.len() {
                calls.push(json!({"id": c["id"], "type": "function",
                    "function": {"name": c["function"]["name"], "arguments": ""}}));
            }
            let args = calls[i]["function"]["arguments"]
                .as_str()
                .unwrap()
                .to_owned();
            calls[i]["function"]["arguments"] =
                json!(args + c["function"]["arguments"].as_str().unwrap());
        }
    }
    (calls, content, finish)
}

#[test]
fn required_calls_follow_the_tool_schema_whole_and_streamed() {
    let addr = server();
    let r = post(
        addr,
        "/v1/chat/completions",
        &body(json!({"tool_choice": "required"}), false),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    let message = &choice["message"];
    assert!(message["content"].is_null(), "{message}");
    let calls = message["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{message}");
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args["city"].is_string(), "{args}");

    let r = post(
        addr,
        "/v1/chat/completions",
        &body(json!({"tool_choice": "required"}), true),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (streamed, content, finish) = streamed_calls(&r.sse_data());
    assert_eq!(finish, "tool_calls");
    assert_eq!(content, "");
    assert_eq!(streamed.len(), 1);
    assert_eq!(streamed[0]["function"], calls[0]["function"]);
}

#[test]
fn auto_answers_or_calls_and_history_renders() {
    let addr = server();
    let r = post(addr, "/v1/chat/completions", &body(json!({}), false));
    assert_eq!(r.status, 200, "{}", r.body);
    let message = &r.json()["choices"][0]["message"];
    let called = message["tool_calls"]
        .as_array()
        .is_some_and(|c| !c.is_empty());
    let answered = message["content"]
        .as_str()
        .is_some_and(|c| !c.is_empty() && !c.starts_with('{'));
    assert!(called || answered, "{message}");

    // A conversation that called the tool and got its result.
    let history = json!({
        "messages": [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21}"},
        ],
        "tools": [weather_tool()], "tool_choice": "none", "temperature": 0, "max_tokens": 16,
    });
    let r = post(addr, "/v1/chat/completions", &history.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["choices"][0]["message"]["content"].is_string());
}

#[test]
fn bad_tools_are_400s() {
    let addr = server();
    for (extra, says) in [
        (json!({"tool_choice": "maybe"}), "tool_choice"),
        (
            json!({"tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "nope",
        ),
        (
            json!({"tools": [{"type": "function", "function": {"name": "bad name"}}]}),
            "tools[0].function.name",
        ),
        (
            json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "dependentRequired": {}}}}], "tool_choice": "required"}),
            "dependentRequired",
        ),
        (
            json!({"response_format": {"type": "json_object"}}),
            "give one",
        ),
    ] {
        let r = post(addr, "/v1/chat/completions", &body(extra.clone(), false));
        assert_eq!(r.status, 400, "{extra}: {}", r.body);
        assert!(r.body.contains(says), "{extra}: {}", r.body);
    }
}
