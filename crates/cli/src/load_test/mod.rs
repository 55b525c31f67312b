//! `tessera load-test`: N concurrent streaming clients against an OpenAI-compatible server
//! (`tessera serve`, llama-server, ...) for M seconds. Each client sends chat requests one
//! after another and reads the SSE stream; the report gives the throughput, the time to the
//! first token and between tokens (p50/p95), the errors, and the server's resident memory
//! before and after (`--server-pid`, Linux). `--hostile` adds the probes of [`hostile`]
//! beside the clients.

mod hostile;

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Args;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[derive(Args, Debug)]
pub struct LoadTestArgs {
    /// The server's base URL (http only).
    #[arg(long = "url", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Concurrent streaming clients.
    #[arg(long = "clients", default_value_t = 8)]
    pub clients: usize,
    /// Seconds to run.
    #[arg(long = "duration", default_value_t = 60)]
    pub duration: u64,
    /// Tokens per answer.
    #[arg(long = "max-tokens", default_value_t = 64)]
    pub max_tokens: usize,
    #[arg(long = "api-key")]
    pub api_key: Option<String>,
    /// The server's process id, to report its resident memory before and after.
    #[arg(long = "server-pid")]
    pub server_pid: Option<u32>,
    /// Print the report as JSON.
    #[arg(long = "json")]
    pub json: bool,
    /// Also run hostile probes (floods, slow and idle sockets, clients that hang up, giant
    /// bodies) against the server while the clients run.
    #[arg(long = "hostile")]
    pub hostile: bool,
    /// Seconds after which the server's memory is sampled as warmed up (its growth after
    /// that is reported).
    #[arg(long = "warmup", default_value_t = 60)]
    pub warmup: u64,
}

/// What one client saw.
#[derive(Default)]
struct Tally {
    requests: usize,
    errors: Vec<String>,
    tokens: usize,
    first_token_s: Vec<f64>,
    between_tokens_s: Vec<f64>,
}

pub fn load_test(args: LoadTestArgs) -> anyhow::Result<()> {
    let authority = args
        .url
        .strip_prefix("http://")
        .context("--url must start with http://")?
        .trim_end_matches('/')
        .to_string();
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    let rss_before = args.server_pid.map(rss_kib).transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.duration);
    let warm_at = start + Duration::from_secs(args.warmup.min(args.duration));
    let (tallies, rss_warm, hostile) = runtime.block_on(async {
        let hostile = args
            .hostile
            .then(|| hostile::spawn_all(&authority, args.api_key.as_deref(), deadline));
        let pid = args.server_pid;
        let warm = tokio::spawn(async move {
            tokio::time::sleep_until(warm_at.into()).await;
            pid.map(rss_kib)
        });
        let tasks: Vec<_> = (0..args.clients)
            .map(|i| {
                let (authority, key) = (authority.clone(), args.api_key.clone());
                tokio::spawn(client(i, authority, key, args.max_tokens, deadline))
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap_or_default());
        }
        let outcomes = match hostile {
            Some((outcomes, probes)) => {
                for p in probes {
                    let _ = p.await;
                }
                Some(outcomes.report())
            }
            None => None,
        };
        let rss_warm = warm.await.ok().flatten().transpose();
        (out, rss_warm, outcomes)
    });
    let rss_warm = rss_warm?;
    let elapsed = start.elapsed().as_secs_f64();
    let rss_after = args.server_pid.map(rss_kib).transpose()?;
    let mut total = Tally::default();
    for t in tallies {
        total.requests += t.requests;
        total.tokens += t.tokens;
        total.errors.extend(t.errors);
        total.first_token_s.extend(t.first_token_s);
        total.between_tokens_s.extend(t.between_tokens_s);
    }
    let report = json!({
        "url": args.url,
        "clients": args.clients,
        "seconds": elapsed,
        "requests": total.requests,
        "errors": total.errors.len(),
        "first_errors": total.errors.iter().take(5).collect::<Vec<_>>(),
        "tokens": total.tokens,
        "tokens_per_second": total.tokens as f64 / elapsed,
        "ttft_ms_p50": percentile(&mut total.first_token_s, 0.50) * 1e3,
        "ttft_ms_p95": percentile(&mut total.first_token_s, 0.95) * 1e3,
        "per_token_ms_p50": percentile(&mut total.between_tokens_s, 0.50) * 1e3,
        "per_token_ms_p95": percentile(&mut total.between_tokens_s, 0.95) * 1e3,
        "server_rss_mib_before": rss_before.map(|k| k as f64 / 1024.0),
        "server_rss_mib_warm": rss_warm.map(|k| k as f64 / 1024.0),
        "server_rss_mib_after": rss_after.map(|k| k as f64 / 1024.0),
        "hostile": hostile,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} clients, {:.0} s: {} requests, {} errors, {} tokens ({:.1} t/s)\n\
             time to first token p50 {:.0} ms, p95 {:.0} ms; between tokens p50 {:.1} ms, p95 {:.1} ms",
            args.clients,
            elapsed,
            total.requests,
            total.errors.len(),
            total.tokens,
            report["tokens_per_second"].as_f64().unwrap_or(0.0),
            report["ttft_ms_p50"].as_f64().unwrap_or(0.0),
            report["ttft_ms_p95"].as_f64().unwrap_or(0.0),
            report["per_token_ms_p50"].as_f64().unwrap_or(0.0),
            report["per_token_ms_p95"].as_f64().unwrap_or(0.0),
        );
        if let (Some(b), Some(w), Some(a)) = (rss_before, rss_warm, rss_after) {
            println!(
                "server RSS {:.1} MiB before, {:.1} MiB after {} s, {:.1} MiB at the end",
                b as f64 / 1024.0,
                w as f64 / 1024.0,
                args.warmup.min(args.duration),
                a as f64 / 1024.0
            );
        }
        if let Some(h) = &report.get("hostile").filter(|h| !h.is_null()) {
            println!("hostile probes: {}", serde_json::to_string_pretty(h)?);
        }
        for e in total.errors.iter().take(5) {
            println!("error: {e}");
        }
    }
    Ok(())
}

/// One client: chat requests back to back until the deadline.
async fn client(
    i: usize,
    authority: String,
    key: Option<String>,
    max_tokens: usize,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let mut n = 0;
    while Instant::now() < deadline {
        n += 1;
        tally.requests += 1;
        // Varied prompts, so that slots do not simply reuse each other's prefixes.
        let body = json!({
            "messages": [{"role": "user", "content": format!("Client {i}, request {n}: tell me a story about the number {}.", i * 1000 + n)}],
            "max_tokens": max_tokens,
            "temperature": 0.7,
            "stream": true,
        })
        .to_string();
        if let Err(e) = stream_once(&authority, key.as_deref(), &body, &mut tally).await {
            tally.errors.push(format!("{e:#}"));
        }
    }
    tally
}

async fn stream_once(
    authority: &str,
    key: Option<&str>,
    body: &str,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(authority).await.context("connect")?;
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let sent = Instant::now();
    stream.write_all(request.as_bytes()).await?;
    let mut lines = BufReader::new(stream).lines();
    let status = lines.next_line().await?.context("no response")?;
    if !status.contains(" 200 ") {
        bail!("{status}");
    }
    let mut last: Option<Instant> = None;
    while let Some(line) = lines.next_line().await? {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            return Ok(());
        }
        let chunk: serde_json::Value = serde_json::from_str(data).context("bad chunk")?;
        if chunk.get("error").is_some() {
            bail!("{chunk}");
        }
        let has_text = chunk["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|t| !t.is_empty());
        if has_text {
            let now = Instant::now();
            match last {
                None => tally.first_token_s.push((now - sent).as_secs_f64()),
                Some(prev) => tally.between_tokens_s.push((now - prev).as_secs_f64()),
            }
            last = Some(now);
            tally.tokens += 1;
        }
    }
    bail!("the stream ended without [DONE]")
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A process's resident memory in KiB (Linux).
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read the memory of process {pid}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no VmRSS")
}
