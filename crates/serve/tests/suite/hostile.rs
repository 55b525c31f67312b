//! Hostile requests: a page on the same machine, a wrong key, malformed or oversized bodies,
//! out-of-range fields. Each gets a 4xx in the error shape; the server keeps serving.

use serde_json::json;

use crate::client::{get, post, request, send_raw};
use crate::{server, ALLOWED, KEY};

fn chat(extra: serde_json::Value) -> String {
    let mut body = json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body.to_string()
}

#[test]
fn a_page_not_on_the_allowlist_is_refused_even_with_the_key() {
    let addr = server();
    let r = request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[("Origin", "http://evil.test")],
        &chat(json!({})),
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.error_type(), "permission_error");
    assert!(r.header("access-control-allow-origin").is_none());
    // Its preflight too.
    let r = request(
        addr,
        "OPTIONS",
        "/v1/chat/completions",
        &[
            ("Origin", "http://evil.test"),
            ("Access-Control-Request-Method", "POST"),
        ],
        "",
    );
    assert_eq!(r.status, 403);
}

#[test]
fn an_allowed_page_gets_cors_and_private_network_access() {
    let addr = server();
    let r = request(
        addr,
        "OPTIONS",
        "/v1/chat/completions",
        &[
            ("Origin", ALLOWED),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
            ("Access-Control-Request-Private-Network", "true"),
        ],
        "",
    );
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some(ALLOWED));
    assert!(r
        .header("access-control-allow-headers")
        .unwrap()
        .contains("Authorization"));
    assert_eq!(
        r.header("access-control-allow-private-network"),
        Some("true")
    );
    let r = request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[("Origin", ALLOWED)],
        &chat(json!({})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("access-control-allow-origin"), Some(ALLOWED));
}

#[test]
fn the_key_is_required_but_for_health() {
    let addr = server();
    for auth in [
        "",
        "Bearer wrong-key-123",
        "Bearer test-key-12",
        "Basic dGVzdA==",
        &format!("bearer {KEY}"),
    ] {
        let headers: Vec<(&str, &str)> = vec![("Authorization", auth)];
        let r = request(
            addr,
            "POST",
            "/v1/chat/completions",
            &headers,
            &chat(json!({})),
        );
        assert_eq!(r.status, 401, "{auth:?}");
        assert_eq!(r.error_type(), "authentication_error");
        assert_eq!(request(addr, "GET", "/v1/models", &headers, "").status, 401);
    }
    assert_eq!(
        request(addr, "GET", "/health", &[("Authorization", "")], "").status,
        200
    );
}

#[test]
fn malformed_bodies_are_400s() {
    let addr = server();
    let deep = "[".repeat(20_000) + &"]".repeat(20_000);
    for body in [
        "",
        "not json",
        "{\"messages\": [",
        "{\"messages\": \"hi\"}",
        "{\"messages\": []}",
        "{\"messages\": [{\"role\": 5, \"content\": \"x\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}",
        "{\"messages\": [{\"role\": \"hacker\", \"content\": \"x\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
        "[1, 2, 3]",
        deep.as_str(),
    ] {
        let r = post(addr, "/v1/chat/completions", body);
        assert_eq!(r.status, 400, "{body:.80}: {}", r.body);
        assert_eq!(r.error_type(), "invalid_request_error");
    }
    // Not UTF-8.
    let mut raw = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n"
    )
    .into_bytes();
    raw.extend_from_slice(b"{\"prompt\": \"\xff\xfe\"}");
    assert_eq!(send_raw(addr, &raw).status, 400);
}

#[test]
fn out_of_range_and_unsupported_fields_are_400s_naming_the_field() {
    let addr = server();
    for (extra, field) in [
        (json!({"temperature": -0.5}), "temperature"),
        (json!({"temperature": "warm"}), "temperature"),
        (json!({"top_p": 2}), "top_p"),
        (json!({"top_k": -3}), "top_k"),
        (json!({"min_p": 1.5}), "min_p"),
        (json!({"max_tokens": 1_000_000_000}), "max_tokens"),
        (json!({"max_tokens": -7}), "max_tokens"),
        (json!({"seed": -2}), "seed"),
        (json!({"presence_penalty": 9}), "presence_penalty"),
        (json!({"repeat_last_n": 1_000_000}), "repeat_last_n"),
        (json!({"logit_bias": {"4000000000": 1}}), "logit_bias"),
        (json!({"logit_bias": {"abc": 1}}), "logit_bias"),
        (json!({"logit_bias": {"5": 1e9}}), "logit_bias"),
        (json!({"stop": vec!["x"; 100]}), "stop"),
        (json!({"n": 3}), "'n'"),
        (
            json!({"tools": [{"type": "function", "function": {"name": "f g"}}]}),
            "tools[0].function.name",
        ),
        (json!({"tool_choice": "sometimes"}), "tool_choice"),
        (json!({"functions": [{"name": "f"}]}), "functions"),
        (
            json!({"response_format": {"type": "xml"}}),
            "response_format",
        ),
        (json!({"logprobs": true}), "logprobs"),
        (json!({"grammar": "root ::= yes"}), "'grammar': GBNF line 1"),
        (json!({"json_schema": 5}), "'json_schema'"),
        (
            json!({"json_schema": {"dependentRequired": {}}}),
            "dependentRequired",
        ),
    ] {
        let r = post(addr, "/v1/chat/completions", &chat(extra.clone()));
        assert_eq!(r.status, 400, "{extra}: {}", r.body);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(field), "{extra}: {message}");
    }
}

#[test]
fn a_prompt_beyond_the_context_is_refused() {
    let addr = server();
    let long = "word ".repeat(2000);
    let r = post(
        addr,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": long}]}).to_string(),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.error_type(), "exceed_context_size_error");
    let r = post(
        addr,
        "/v1/completions",
        &json!({"prompt": [1, 2, 99999999]}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post(
        addr,
        "/detokenize",
        &json!({"tokens": [1, 4000000000u64]}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
}

#[test]
fn an_oversized_body_is_413_and_a_lying_length_does_no_harm() {
    let addr = server();
    let big = json!({"prompt": "a".repeat(100 << 10)}).to_string();
    let r = post(addr, "/v1/completions", &big);
    assert_eq!(r.status, 413, "{}", r.body);
    // A Content-Length far beyond the body (and the limit): refused before reading it.
    let raw = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{{}}"
    );
    assert_eq!(send_raw(addr, raw.as_bytes()).status, 413);
}

#[test]
fn unknown_paths_and_methods() {
    let addr = server();
    let r = get(addr, "/v1/nothing");
    assert_eq!(r.status, 404);
    assert_eq!(r.error_type(), "not_found_error");
    assert_eq!(get(addr, "/v1/chat/completions").status, 405);
    // And the server still answers.
    assert_eq!(get(addr, "/health").status, 200);
}
