//! The slots: requests side by side give what they give alone, a conversation's next turn
//! reuses its slot's KV cache, and a client that goes away frees its slot.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{build, post};
use crate::endpoints::chat_body;
use crate::server;

#[test]
fn requests_side_by_side_give_what_they_give_alone() {
    let addr = server();
    let prompts = ["Write a haiku about the sea.", "List four prime numbers."];
    let alone: Vec<String> = prompts
        .iter()
        .map(|p| post(addr, "/v1/chat/completions", &chat_body(p, 24, false)).body)
        .collect();
    let together: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = prompts
            .iter()
            .map(|p| {
                s.spawn(move || post(addr, "/v1/chat/completions", &chat_body(p, 24, false)).body)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (a, t) in alone.iter().zip(&together) {
        let content = |b: &str| {
            serde_json::from_str::<serde_json::Value>(b).unwrap()["choices"][0]["message"]
                ["content"]
                .clone()
        };
        assert_eq!(content(a), content(t));
    }
}

#[test]
fn the_next_turn_reuses_the_conversation_prefix() {
    let addr = server();
    let first = json!({
        "messages": [{"role": "user", "content": "Tell me a short fact about owls."}],
        "temperature": 0, "max_tokens": 16,
    });
    let a = post(addr, "/v1/chat/completions", &first.to_string()).json();
    let answer = a["choices"][0]["message"]["content"].as_str().unwrap();
    let second = json!({
        "messages": [
            {"role": "user", "content": "Tell me a short fact about owls."},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "And one about cats?"},
        ],
        "temperature": 0, "max_tokens": 8,
    });
    let b = post(addr, "/v1/chat/completions", &second.to_string()).json();
    let cached = b["timings"]["cache_n"].as_u64().unwrap();
    let prompt = a["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(
        cached >= prompt,
        "reused {cached} of the first turn's {prompt} prompt tokens: {b}"
    );
}

#[test]
fn a_client_that_goes_away_frees_its_slot() {
    let addr = server();
    // Both slots busy with long streams, whose clients read one chunk and hang up.
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).unwrap();
        let body = json!({"prompt": "Once upon a time", "max_tokens": 400, "stream": true, "ignore_eos": true});
        s.write_all(build("POST", "/v1/completions", &[], &body.to_string()).as_bytes())
            .unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        while !line.starts_with("data: ") {
            line.clear();
            r.read_line(&mut line).unwrap();
        }
    }
    // Both dropped: the next request must not wait for 400-token generations.
    let t = Instant::now();
    let r = post(
        addr,
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 4}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "waited {:?}",
        t.elapsed()
    );
}
