//! What a request or connection may take (issue 48's probes, one test each): the `Host` check
//! against DNS rebinding, time limits on heads and bodies, the connection cap, the queue
//! bound, requests whose clients left, the generation cap, `/tokenize`'s cap, `/health`
//! beside heavy requests, and caches that do not cross callers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_serve::{Access, Limits, ModelSpec, Registry, Settings};
use tessera_testkit::BatchCounts;

use crate::client::{build, get, post, read_response, request, send_raw, wait_healthy};
use crate::slots::CountingHost;
use crate::{server, smollm2_spec, start_with, TestHost, KEY};

/// SmolLM2 with `parallel` slots, a `queue`, and `settings` (the test key unless they set one).
fn serve(spec: ModelSpec, queue: usize, settings: Settings) -> SocketAddr {
    let registry = Registry::new(vec![spec], Arc::new(TestHost), queue);
    registry.load_startup_models();
    let addr = start_with(registry, settings);
    wait_healthy(addr);
    addr
}

fn keyed() -> Access {
    Access {
        api_key: Some(KEY.into()),
        ..Access::default()
    }
}

fn quick_limits() -> Limits {
    Limits {
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        body_min_rate: 1 << 20,
        write_timeout: Duration::from_secs(2),
        max_connections: 256,
    }
}

/// Whether the server closes `s` within `within` (reading nothing else first).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                )
            }
        }
    }
}

fn with_host(addr: SocketAddr, host: Option<&str>) -> u16 {
    let host = host.map_or(String::new(), |h| format!("Host: {h}\r\n"));
    let raw = format!(
        "GET /v1/models HTTP/1.1\r\n{host}Authorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
    );
    send_raw(addr, raw.as_bytes()).status
}

#[test]
fn hosts_of_this_machine_pass_and_other_names_are_refused() {
    let addr = server();
    let port = addr.port();
    for host in [
        "127.0.0.1".to_string(),
        format!("127.0.0.1:{port}"),
        "[::1]".into(),
        format!("[::1]:{port}"),
        "localhost".into(),
        format!("localhost:{port}"),
        "LocalHost.".into(),
        "app.localhost:5173".into(),
    ] {
        assert_eq!(with_host(addr, Some(&host)), 200, "{host}");
    }
    // DNS rebinding: a page's own name resolved to 127.0.0.1, with no Origin on a GET.
    for host in [
        format!("evil.com:{port}"),
        "evil.com".into(),
        "127.0.0.1.evil.com".into(),
        "localhost.evil.com".into(),
        "[::1".into(),
        "localhost:http".into(),
    ] {
        assert_eq!(with_host(addr, Some(&host)), 403, "{host}");
    }
    assert_eq!(with_host(addr, None), 403);
    let named = Access {
        allowed_hosts: vec!["mybox.lan".into()],
        ..Access::default()
    };
    assert!(named.host_allowed("mybox.lan:8080") && named.host_allowed("MYBOX.LAN"));
    assert!(!named.host_allowed("other.lan"));
}

#[test]
fn an_answer_that_asks_for_no_limit_ends_at_the_cap_even_with_context_shift() {
    let spec = ModelSpec {
        n_ctx: 64,
        context_shift: true,
        ..smollm2_spec(1)
    };
    let addr = serve(spec.clone(), 4, Settings::new(keyed()));
    let body = json!({"prompt": "Once upon a time", "max_tokens": -1, "ignore_eos": true});
    let v = post(addr, "/v1/completions", &body.to_string()).json();
    assert_eq!(v["choices"][0]["finish_reason"], "length", "{v}");
    // One slot's context: the default cap.
    assert_eq!(v["usage"]["completion_tokens"], 64, "{v}");
    let capped = Settings {
        max_generated: Some(10),
        ..Settings::new(keyed())
    };
    let addr = serve(spec, 4, capped);
    let body = json!({"prompt": "Once upon a time", "max_tokens": 50, "ignore_eos": true});
    let v = post(addr, "/v1/completions", &body.to_string()).json();
    assert_eq!(v["usage"]["completion_tokens"], 10, "{v}");
}

#[test]
fn slow_and_silent_connections_are_closed() {
    let settings = Settings {
        limits: quick_limits(),
        ..Settings::new(keyed())
    };
    let addr = serve(smollm2_spec(1), 4, settings);
    let close_in = Duration::from_secs(5);
    // A silent socket, and half a request line (slowloris).
    let mut silent = TcpStream::connect(addr).unwrap();
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET /hea").unwrap();
    assert!(closed_within(&mut silent, close_in));
    assert!(closed_within(&mut half, close_in));
    // A keep-alive connection idle after its answer.
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut reader = std::io::BufReader::new(idle.try_clone().unwrap());
    assert_eq!(read_response(&mut reader).status, 200);
    assert!(closed_within(&mut idle, close_in));
    // A body far slower than the minimum rate: 408 once its time is up.
    let t = Instant::now();
    let mut slow = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 100000\r\n\r\n{{\"prompt\""
    );
    slow.write_all(head.as_bytes()).unwrap();
    slow.set_read_timeout(Some(close_in)).unwrap();
    let r = read_response(&mut std::io::BufReader::new(slow));
    assert_eq!(r.status, 408, "{}", r.body);
    assert!(t.elapsed() < close_in, "{:?}", t.elapsed());
}

#[test]
fn at_the_connection_cap_an_idle_connection_makes_room() {
    let settings = Settings {
        limits: Limits {
            header_timeout: Duration::from_secs(60),
            max_connections: 4,
            ..Limits::default()
        },
        ..Settings::new(keyed())
    };
    let addr = serve(smollm2_spec(1), 4, settings);
    std::thread::sleep(Duration::from_millis(200)); // the health checks' connections end
    let mut idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    assert_eq!(get(addr, "/health").status, 200);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let closed = idle
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(500)))
        .filter(|&closed| closed)
        .count();
    assert!(closed >= 1, "no idle connection was closed");
}

#[test]
fn past_the_queue_bound_requests_get_503_with_retry_after() {
    let addr = serve(smollm2_spec(1), 2, Settings::new(keyed()));
    let long = json!({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": true});
    let running: Vec<_> = (0..3)
        .map(|i| {
            std::thread::sleep(Duration::from_millis(if i == 0 { 0 } else { 300 }));
            let body = long.to_string();
            std::thread::spawn(move || post(addr, "/v1/completions", &body).status)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // One runs, two wait: the fourth is refused at once.
    let r = post(addr, "/v1/completions", &long.to_string());
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.error_type(), "unavailable_error");
    for t in running {
        assert_eq!(t.join().unwrap(), 200);
    }
}

/// SmolLM2 in one slot, its forward passes counted.
fn counted_server() -> (SocketAddr, Arc<BatchCounts>) {
    let counts = Arc::new(BatchCounts::default());
    let registry = Registry::new(
        vec![smollm2_spec(1)],
        Arc::new(CountingHost(counts.clone())),
        16,
    );
    registry.load_startup_models();
    let addr = start_with(registry, Settings::new(keyed()));
    wait_healthy(addr);
    (addr, counts)
}

#[test]
fn waiting_requests_whose_clients_left_cost_no_compute() {
    let (addr, counts) = counted_server();
    let n_long = 60;
    let body = json!({"prompt": "Hello", "max_tokens": n_long, "ignore_eos": true});
    counts.reset();
    let first = std::thread::spawn(move || post(addr, "/v1/completions", &body.to_string()));
    std::thread::sleep(Duration::from_millis(200));
    // Five long prompts (four prefill slices each) wait for the slot; their clients hang up.
    let prompt = "word ".repeat(400);
    for stream in [true, false, true, false, true] {
        let body = json!({"prompt": prompt, "max_tokens": 4, "stream": stream});
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(build("POST", "/v1/completions", &[], &body.to_string()).as_bytes())
            .unwrap();
        drop(s);
    }
    let first = first.join().unwrap().json();
    assert_eq!(first["usage"]["completion_tokens"], n_long, "{first}");
    let next = post(
        addr,
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 2}).to_string(),
    );
    assert_eq!(next.status, 200);
    // The first request's passes (a prompt pass and one per token, give or take the last) and
    // the next one's: none for the five that left.
    let passes = counts.passes();
    assert!(passes <= n_long as usize + 6, "{passes} forward passes");
}

#[test]
fn tokenize_is_capped_and_health_answers_beside_the_heaviest_requests() {
    let settings = Settings {
        body_limit: 4 << 20,
        tokenize_limit: 1 << 20,
        ..Settings::new(keyed())
    };
    let addr = serve(smollm2_spec(1), 4, settings);
    let over = json!({"content": "a ".repeat(600 << 10)}).to_string();
    let r = post(addr, "/tokenize", &over);
    assert_eq!(r.status, 413, "{:.200}", r.body);
    let content = "The quick brown fox jumps over the lazy dog. ".repeat((1 << 20) / 46);
    let heavy = json!({"content": content, "with_pieces": true}).to_string();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let body = heavy.clone();
            std::thread::spawn(move || post(addr, "/tokenize", &body))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut slowest = Duration::ZERO;
    while !workers.iter().all(|w| w.is_finished()) {
        let t = Instant::now();
        let r = request(addr, "GET", "/health", &[], "");
        slowest = slowest.max(t.elapsed());
        assert_eq!(r.status, 200);
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("slowest /health beside two 1 MiB /tokenize: {slowest:?}");
    // 100 ms on an idle machine; a loaded test machine gets some slack.
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    for w in workers {
        let r = w.join().unwrap();
        assert_eq!(r.status, 200);
        let v = r.json();
        let tokens = v["tokens"].as_array().unwrap();
        assert!(tokens.len() > 100_000);
        assert_eq!(tokens[1]["piece"], " quick", "{}", tokens[1]);
    }
}

#[test]
fn a_cached_prompt_is_reused_only_for_its_own_caller() {
    let (a, b) = ("http://a.test", "http://b.test");
    let access = |share| Settings {
        share_prefix_cache: share,
        ..Settings::new(Access {
            api_key: Some(KEY.into()),
            allowed_origins: vec![a.into(), b.into()],
            ..Access::default()
        })
    };
    let body = json!({"prompt": "My secret is 4921 and the weather today is", "max_tokens": 1})
        .to_string();
    let cache_n = |addr, origin| {
        let r = request(
            addr,
            "POST",
            "/v1/completions",
            &[("Origin", origin)],
            &body,
        );
        r.json()["timings"]["cache_n"].as_u64().unwrap()
    };
    let addr = serve(smollm2_spec(1), 4, access(false));
    cache_n(addr, a);
    assert!(cache_n(addr, a) > 0, "the same caller reuses its prompt");
    assert_eq!(cache_n(addr, b), 0, "another caller learns nothing of it");
    let addr = serve(smollm2_spec(1), 4, access(true));
    cache_n(addr, a);
    assert!(cache_n(addr, b) > 0, "shared when the operator allows it");
}

#[test]
fn both_health_paths_answer_without_the_key_and_n_probs_is_refused() {
    let addr = server();
    for path in ["/health", "/v1/health"] {
        let r = request(addr, "GET", path, &[("Authorization", "Bearer wrong")], "");
        assert_eq!(r.status, 200, "{path}");
    }
    let r = post(
        addr,
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 1, "n_probs": 5}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("n_probs"), "{}", r.body);
    let r = post(
        addr,
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 1, "n_probs": 0}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_client_that_hangs_up_right_after_asking_costs_at_most_a_slice() {
    let (addr, counts) = counted_server();
    counts.reset();
    // The slot is free, so each starts at once: its hang-up must stop it, though nothing is
    // written to the client before the prompt is decoded.
    let prompt = "word ".repeat(400);
    for stream in [false, true] {
        let body =
            json!({"prompt": prompt, "max_tokens": 64, "ignore_eos": true, "stream": stream});
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(build("POST", "/v1/completions", &[], &body.to_string()).as_bytes())
            .unwrap();
        drop(s);
        std::thread::sleep(Duration::from_millis(1500));
    }
    let passes = counts.passes();
    assert!(
        passes <= 4,
        "{passes} forward passes for two requests whose clients left"
    );
}
