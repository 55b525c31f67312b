//! The slots: requests side by side give what they give alone (and share one batch per
//! step), a conversation's next turn reuses its slot's KV cache, and a client that goes away
//! frees its slot.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_core::{Context, ContextParams, Model};
use tessera_serve::{Access, ModelHost, ModelSpec, Registry};
use tessera_testkit::{BatchCounts, CountedCpuBackend};

use crate::client::{build, post, wait_healthy};
use crate::endpoints::chat_body;
use crate::{server, smollm2_spec, start, TestHost, ALLOWED, KEY};

/// The test host, its contexts counting forward passes and the sequences in each batch.
pub(crate) struct CountingHost(pub Arc<BatchCounts>);

impl ModelHost for CountingHost {
    fn load(&self, spec: &ModelSpec) -> Result<Arc<Model>, String> {
        TestHost.load(spec)
    }

    fn context(
        &self,
        _: &ModelSpec,
        model: &Arc<Model>,
        n_ctx: usize,
        n_seq: usize,
    ) -> Result<Context, String> {
        let backend = CountedCpuBackend::new(2, self.0.clone(), true);
        let params = ContextParams {
            n_ctx,
            n_batch: 512,
        };
        Context::with_sequences(model.clone(), params, n_seq, Box::new(backend))
            .map_err(|e| e.to_string())
    }
}

/// Continuous batching end to end: three requests at once (greedy, seeded sampling, a chat)
/// run in one batch per step, and each gives exactly what it gives alone.
#[test]
fn requests_side_by_side_share_batches_and_give_what_they_give_alone() {
    let counts = Arc::new(BatchCounts::default());
    let registry = Registry::new(
        vec![smollm2_spec(3)],
        Arc::new(CountingHost(counts.clone())),
        8,
    );
    registry.load_startup_models();
    let access = Access {
        api_key: Some(KEY.into()),
        allowed_origins: vec![ALLOWED.into()],
        ..Access::default()
    };
    let addr = start(registry, access);
    wait_healthy(addr);
    let requests = [
        (
            "/v1/completions",
            json!({"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0,
                   "ignore_eos": true})
            .to_string(),
        ),
        (
            "/v1/completions",
            json!({"prompt": "The best way to learn a language is", "max_tokens": 32,
                   "temperature": 0.9, "seed": 7, "ignore_eos": true})
            .to_string(),
        ),
        (
            "/v1/chat/completions",
            chat_body("Name three rivers in Europe.", 32, false),
        ),
    ];
    let text = |body: &str| {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let choice = &v["choices"][0];
        match choice["message"]["content"].as_str() {
            Some(t) => t.to_string(),
            None => choice["text"].as_str().unwrap().to_string(),
        }
    };
    let alone: Vec<String> = requests
        .iter()
        .map(|(path, body)| text(&post(addr, path, body).body))
        .collect();
    assert_eq!(
        counts.most_sequences(),
        1,
        "one request at a time: {counts:?}"
    );
    counts.reset();
    let together: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = requests
            .iter()
            .map(|(path, body)| s.spawn(move || text(&post(addr, path, body).body)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(alone, together);
    assert!(
        counts.most_sequences() >= 2,
        "the requests never shared a batch: {counts:?}"
    );
}

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

/// With `--context-shift` an answer goes on past its slot's full context; without, it ends
/// there (`finish_reason: "length"` either way).
#[test]
fn a_context_shift_lets_an_answer_outgrow_its_slot() {
    use std::sync::Arc;
    use tessera_serve::{Access, ModelSpec, Registry};
    let completion_tokens = |shift: bool| {
        let spec = ModelSpec {
            n_ctx: 64,
            parallel: 1,
            context_shift: shift,
            ..crate::smollm2_spec(1)
        };
        let registry = Registry::new(vec![spec], Arc::new(crate::TestHost), 4);
        registry.load_startup_models();
        let addr = crate::start(registry, Access::default());
        crate::client::wait_healthy(addr);
        let body = json!({"prompt": "Once upon a time", "max_tokens": 62, "ignore_eos": true, "temperature": 0});
        let v = post(addr, "/v1/completions", &body.to_string()).json();
        assert_eq!(v["choices"][0]["finish_reason"], "length", "{v}");
        v["usage"]["completion_tokens"].as_u64().unwrap()
    };
    assert!(completion_tokens(false) < 62);
    assert_eq!(completion_tokens(true), 62);
}
