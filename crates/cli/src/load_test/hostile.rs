//! `tessera load-test --hostile`: while the normal clients run, what a hostile page or process
//! on the same machine can throw at a companion host, each probe in a loop of its own:
//! - floods from a page whose origin is not allowed, and from a rebound domain name (`Host`);
//! - slow clients: sockets that send a head a byte at a time (slowloris), and idle sockets
//!   beyond the connection cap;
//! - clients that send a long streaming prompt and hang up at once;
//! - giant bodies: over the limit (declared, and lying about their length), a body at the
//!   limit whose bulk is an unknown field, and the largest `/tokenize`.
//!
//! Each probe counts what it sent and how the server answered; the normal clients' figures
//! show what the probes cost them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Answers per probe: status line (or what happened instead) -> count.
#[derive(Default)]
pub struct Outcomes(Mutex<BTreeMap<String, BTreeMap<String, u64>>>);

impl Outcomes {
    fn add(&self, probe: &str, outcome: impl Into<String>) {
        let mut map = self.0.lock().unwrap();
        *map.entry(probe.into())
            .or_default()
            .entry(outcome.into())
            .or_default() += 1;
    }

    pub fn report(&self) -> serde_json::Value {
        json!(&*self.0.lock().unwrap())
    }
}

/// Starts every probe against `authority` until `deadline`.
pub fn spawn_all(
    authority: &str,
    key: Option<&str>,
    deadline: Instant,
) -> (Arc<Outcomes>, Vec<tokio::task::JoinHandle<()>>) {
    let out = Arc::new(Outcomes::default());
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let a = authority.to_string();
    let chat =
        json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}).to_string();
    let long_prompt = json!({
        "prompt": "word ".repeat(1500), "max_tokens": 64, "stream": true,
    })
    .to_string();
    let padding = "0,".repeat(3 << 20);
    let at_limit = format!(r#"{{"prompt": "Hi", "max_tokens": 1, "padding": [{padding}0]}}"#);
    let tokenize =
        json!({"content": "The quick brown fox. ".repeat((1 << 20) / 22), "with_pieces": true})
            .to_string();
    let mut tasks = Vec::new();
    let mut every = |probe: &'static str, period_ms: u64, raw: String, hang_up: bool| {
        let (a, out) = (a.clone(), out.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let outcome = exchange(&a, raw.as_bytes(), hang_up).await;
                out.add(probe, outcome);
                tokio::time::sleep(Duration::from_millis(period_ms)).await;
            }
        }));
    };
    every(
        "flood: a page whose origin is not allowed",
        50,
        post(
            &a,
            "/v1/chat/completions",
            "Origin: http://evil.test\r\n",
            &chat,
        ),
        false,
    );
    every(
        "flood: a rebound name (Host: evil.test)",
        50,
        format!("GET /v1/models HTTP/1.1\r\nHost: evil.test\r\n{auth}Connection: close\r\n\r\n"),
        false,
    );
    every(
        "a long streaming prompt, client hangs up",
        2000,
        post(&a, "/v1/completions", &auth, &long_prompt),
        true,
    );
    every(
        "a body over the limit (declared)",
        3000,
        format!(
            "POST /v1/completions HTTP/1.1\r\nHost: {a}\r\n{auth}Content-Length: 9000000\r\nConnection: close\r\n\r\n{{}}"
        ),
        false,
    );
    every(
        "8 MiB of an unknown field",
        5000,
        post(&a, "/v1/completions", &auth, &at_limit),
        false,
    );
    every(
        "the largest /tokenize, with pieces",
        5000,
        post(&a, "/tokenize", &auth, &tokenize),
        false,
    );
    for i in 0..50 {
        let (a, out) = (a.clone(), out.clone());
        tasks.push(tokio::spawn(slowloris(a, out, deadline, i)));
    }
    let (a2, out2) = (a.clone(), out.clone());
    tasks.push(tokio::spawn(idle_sockets(a2, out2, deadline, 300)));
    (out, tasks)
}

fn post(authority: &str, path: &str, extra: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Sends `raw` and reads the status line (`hang_up`: closes right after sending).
async fn exchange(authority: &str, raw: &[u8], hang_up: bool) -> String {
    let mut s = match TcpStream::connect(authority).await {
        Ok(s) => s,
        Err(e) => return format!("connect: {}", e.kind()),
    };
    if let Err(e) = s.write_all(raw).await {
        // The server may answer (413) and close before a giant body is all sent.
        if e.kind() != std::io::ErrorKind::ConnectionReset
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return format!("send: {}", e.kind());
        }
    }
    if hang_up {
        return "hung up".into();
    }
    let mut head = vec![0; 64];
    let read = tokio::time::timeout(Duration::from_secs(120), s.read(&mut head)).await;
    let mut outcome = match read {
        Ok(Ok(n)) if n > 0 => String::from_utf8_lossy(&head[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_string(),
        Ok(Ok(_)) => "closed without an answer".into(),
        Ok(Err(e)) => format!("read: {}", e.kind()),
        Err(_) => "no answer in 120 s".into(),
    };
    outcome.truncate(40);
    // Drain the rest, so that a long answer (tokenize) costs the server its writing.
    let mut sink = vec![0; 1 << 16];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(60), s.read(&mut sink)).await {
        if n == 0 {
            break;
        }
    }
    outcome
}

/// A head sent a byte every second, reopened when the server closes it.
async fn slowloris(authority: String, out: Arc<Outcomes>, deadline: Instant, i: u64) {
    let head = format!(
        "GET /health HTTP/1.1\r\nHost: {authority}\r\nX-Slow: {}\r\n",
        "a".repeat(4000)
    );
    tokio::time::sleep(Duration::from_millis(i * 20)).await;
    while Instant::now() < deadline {
        let Ok(mut s) = TcpStream::connect(&authority).await else {
            out.add("slowloris", "connect failed");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let started = Instant::now();
        for b in head.bytes() {
            if Instant::now() >= deadline || s.write_all(&[b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        out.add(
            "slowloris",
            format!("closed after {} s", (started.elapsed().as_secs() / 5) * 5),
        );
    }
}

/// `n` connections that send nothing, each reopened a second after the server closes it.
async fn idle_sockets(authority: String, out: Arc<Outcomes>, deadline: Instant, n: usize) {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (authority, out) = (authority.clone(), out.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let Ok(mut s) = TcpStream::connect(&authority).await else {
                    out.add("idle socket", "connect failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                let mut b = [0; 1];
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, s.read(&mut b)).await {
                    Ok(_) => out.add("idle socket", "closed by the server"),
                    Err(_) => out.add("idle socket", "open at the end"),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}
