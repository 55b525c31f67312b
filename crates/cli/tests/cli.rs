//! The `tessera` binary end to end: inspect, tokenize, run, and how errors are reported.

use std::path::PathBuf;
use std::process::{Command, Output};

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn model(file: &str) -> PathBuf {
    let path = tessera_testkit::models_dir().join(file);
    assert!(
        path.exists(),
        "test model {} is missing: run scripts/fetch-models.sh (or set TESSERA_MODELS)",
        path.display()
    );
    path
}

use tessera_testkit::fixture;

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("run tessera")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "tessera failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("UTF-8 stdout")
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// A failed run: exit code ≠ 0, nothing on stdout, exactly one line on stderr.
fn assert_one_line_error(o: &Output, must_contain: &str) {
    assert!(!o.status.success(), "expected failure");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err:?}");
    assert!(err.starts_with("error: "), "{err:?}");
    assert!(err.contains(must_contain), "{err:?} lacks {must_contain:?}");
    assert!(o.stdout.is_empty());
}

#[test]
fn inspect_prints_metadata_and_tensor_table() {
    let m = model(SMOLLM2);
    let out = stdout(&tessera(&["inspect", "-m", m.to_str().unwrap()]));
    assert!(
        out.contains("GGUF v3, 33 metadata keys, 272 tensors"),
        "{out}"
    );
    let line = |key: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .to_owned()
    };
    assert!(line("general.architecture").ends_with("\"llama\""));
    assert!(line("llama.block_count").ends_with(" 30"));
    // 49152 tokens: abbreviated.
    let tokens = line("tokenizer.ggml.tokens");
    assert!(
        tokens.contains("string[49152]") && tokens.contains("… 49144 more]"),
        "{tokens}"
    );
    // name, type, shape, bytes
    let embd: Vec<String> = line("0").split_whitespace().map(str::to_owned).collect();
    assert_eq!(
        embd,
        [
            "0",
            "token_embd.weight",
            "Q8_0",
            "[576,",
            "49152]",
            "30081024"
        ]
    );
    assert_eq!(out.lines().filter(|l| l.contains("blk.")).count(), 30 * 9);
}

#[test]
fn tokenize_ids_match_llama_cpp() {
    let m = model(SMOLLM2);
    let cases = fixture("tokenize_smollm2.jsonl");
    // A line where parsing special tokens matters, and a plain one.
    let special = cases
        .iter()
        .find(|c| c["ids"] != c["ids_no_parse_special"])
        .expect("a line with special tokens");
    for case in [special, &cases[0]] {
        let text = case["text"].as_str().unwrap();
        let parsed: Vec<u32> = serde_json::from_str(&stdout(&tessera(&[
            "tokenize",
            "-m",
            m.to_str().unwrap(),
            "-p",
            text,
            "--ids",
        ])))
        .unwrap();
        assert_eq!(parsed, ids(&case["ids"]), "{text:?}");
        let plain: Vec<u32> = serde_json::from_str(&stdout(&tessera(&[
            "tokenize",
            "-m",
            m.to_str().unwrap(),
            "-p",
            text,
            "--ids",
            "--no-parse-special",
        ])))
        .unwrap();
        assert_eq!(plain, ids(&case["ids_no_parse_special"]), "{text:?}");
    }
}

/// The first greedy fixture's prompt and the text of its first 16 generated tokens.
fn greedy_fixture(m: &std::path::Path) -> (String, String) {
    let case = &fixture("greedy_smollm2.jsonl")[0];
    let prompt = case["prompt"].as_str().unwrap().to_string();
    let want_ids = &ids(&case["gen_ids"])[..16];
    let file = tessera_gguf::GgufFile::open(m).unwrap();
    let tok = tessera_tokenizer::Tokenizer::from_gguf(file.header()).unwrap();
    let want: Vec<u8> = want_ids
        .iter()
        .flat_map(|&t| tok.token_to_piece(t, false))
        .collect();
    (prompt, String::from_utf8(want).unwrap())
}

#[test]
fn run_greedy_prints_llama_cpp_continuation() {
    let m = model(SMOLLM2);
    let (prompt, want) = greedy_fixture(&m);
    let prompt = prompt.as_str();
    let o = tessera(&[
        "run",
        "-m",
        m.to_str().unwrap(),
        "-p",
        prompt,
        "-n",
        "16",
        "--temp",
        "0",
        "-t",
        "2",
    ]);
    let out = stdout(&o);
    // The generated text, then one newline.
    assert_eq!(out.strip_suffix('\n').unwrap(), want);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("generated: 16 tokens"), "{err}");
    // The positional prompt is the same as -p.
    let o2 = tessera(&[
        "run",
        "-m",
        m.to_str().unwrap(),
        "-n",
        "16",
        "--temp",
        "0",
        "-t",
        "2",
        prompt,
    ]);
    assert_eq!(stdout(&o2), out);
}

/// The Vulkan backend (lavapipe in CI) gives llama.cpp's greedy continuation too.
#[test]
fn run_greedy_on_vulkan_prints_llama_cpp_continuation() {
    let m = model(SMOLLM2);
    let (prompt, want) = greedy_fixture(&m);
    let o = tessera(&[
        "run",
        "-m",
        m.to_str().unwrap(),
        "-p",
        &prompt,
        "-n",
        "16",
        "--temp",
        "0",
        "--backend",
        "vulkan",
        "--device",
        "0",
    ]);
    assert_eq!(stdout(&o).strip_suffix('\n').unwrap(), want);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("vulkan: "), "{err}");
}

/// `--backend auto` without a usable Vulkan device runs on the CPU and says why: here the
/// loader is missing (and lavapipe alone would be refused as a software device).
#[test]
fn auto_backend_falls_back_to_the_cpu_saying_why() {
    let m = model(SMOLLM2);
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "run",
            "-m",
            m.to_str().unwrap(),
            "-p",
            "Hi",
            "-n",
            "2",
            "--temp",
            "0",
        ])
        .args(["--backend", "auto"])
        .env("TESSERA_VULKAN_LOADER", "/nonexistent/libvulkan.so.1")
        .output()
        .unwrap();
    stdout(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("backend auto: the CPU") && err.contains("no Vulkan loader"),
        "{err}"
    );
    // `--backend vulkan` itself fails with that reason, in one line.
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["run", "-m", m.to_str().unwrap(), "-p", "Hi", "-n", "2"])
        .args(["--backend", "vulkan"])
        .env("TESSERA_VULKAN_LOADER", "/nonexistent/libvulkan.so.1")
        .output()
        .unwrap();
    assert_one_line_error(&o, "no Vulkan loader");
}

/// `tessera devices`: a section per backend; lavapipe in the Vulkan one with its driver,
/// UUID, memory and features.
#[test]
fn devices_lists_every_backend_section() {
    let out = stdout(&tessera(&["devices"]));
    for section in ["cpu:", "wgpu:", "vulkan:", "cuda:"] {
        assert!(out.lines().any(|l| l == section), "{out}");
    }
    let vulkan = out.split("vulkan:\n").nth(1).unwrap();
    let vulkan = vulkan.split("cuda:\n").next().unwrap();
    assert!(vulkan.contains("0: llvmpipe"), "{out}");
    for field in ["driver: llvmpipe", "uuid: ", "memory: ", "features used: "] {
        assert!(vulkan.contains(field), "{field} in {out}");
    }
}

#[test]
fn missing_file_is_one_line_error() {
    let o = tessera(&["inspect", "-m", "/nonexistent/model.gguf"]);
    assert_one_line_error(&o, "/nonexistent/model.gguf");
    let o = tessera(&["run", "-m", "/nonexistent/model.gguf", "-p", "hi"]);
    assert_one_line_error(&o, "/nonexistent/model.gguf");
}

#[test]
fn corrupt_file_is_one_line_error() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Not GGUF at all.
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"this is not a model, just some text\n").unwrap();
    assert_one_line_error(
        &tessera(&["inspect", "-m", junk.to_str().unwrap()]),
        "magic",
    );
    // A real model cut short: the header's arrays run past the end.
    let bytes = std::fs::read(model(SMOLLM2)).unwrap();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..100_000]).unwrap();
    for cmd in ["inspect", "tokenize"] {
        let mut args = vec![cmd, "-m", cut.to_str().unwrap()];
        if cmd == "tokenize" {
            args.extend(["-p", "hi"]);
        }
        assert_one_line_error(&tessera(&args), "cut.gguf");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `-j` constrains the answer to a JSON schema; `--grammar` to a Lark grammar; a schema with a
/// keyword the engine does not implement is refused by name.
#[test]
fn run_follows_json_schema_and_grammar_flags() {
    let m = model(SMOLLM2);
    let m = m.to_str().unwrap();
    let schema = r#"{"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
        "population": {"type": "integer", "minimum": 0, "maximum": 99999999}},
        "required": ["city", "population"], "additionalProperties": false}"#;
    let prompt = "Give the largest city of France and its population as JSON.";
    let common = [
        "run", "-m", m, "--chat", "-p", prompt, "-n", "64", "--temp", "0", "-t", "2",
    ];
    let o = tessera(&[&common[..], &["-j", schema]].concat());
    let out = stdout(&o);
    let v: serde_json::Value = serde_json::from_str(out.trim_end()).expect(&out);
    assert!(v["city"].is_string() && v["population"].is_u64(), "{v}");
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("the grammar is complete"));

    let o = tessera(&[&common[..], &["--grammar", r#"start: "yes" | "no""#]].concat());
    let out = stdout(&o);
    assert!(["yes", "no"].contains(&out.trim_end()), "{out:?}");

    // Compiled against the model's vocabulary: refused once it is loaded, before any text.
    let bad = r#"{"type": "object", "dependentRequired": {"a": ["b"]}}"#;
    let o = tessera(&[&common[..], &["-j", bad]].concat());
    assert!(!o.status.success() && o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    let last = err.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("error: grammar: ") && last.contains("dependentRequired"),
        "{err}"
    );
    assert_one_line_error(
        &tessera(&[&common[..], &["-j", "{oops"]].concat()),
        "--json-schema",
    );
}

#[test]
fn bad_sampling_option_is_one_line_error() {
    let m = model(SMOLLM2);
    let o = tessera(&[
        "run",
        "-m",
        m.to_str().unwrap(),
        "-p",
        "hi",
        "--top-p",
        "1.5",
    ]);
    assert_one_line_error(&o, "top_p");
}

#[test]
fn bench_json_has_llama_bench_fields() {
    let m = model(SMOLLM2);
    let out = stdout(&tessera(&[
        "bench",
        "-m",
        m.to_str().unwrap(),
        "-p",
        "16",
        "-n",
        "4",
        "-r",
        "2",
        "-t",
        "1",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["n_prompt"].as_u64(), rows[0]["n_gen"].as_u64()),
        (Some(16), Some(0))
    );
    assert_eq!(
        (rows[1]["n_prompt"].as_u64(), rows[1]["n_gen"].as_u64()),
        (Some(0), Some(4))
    );
    for r in rows {
        assert_eq!(r["n_threads"].as_u64(), Some(1));
        assert_eq!(r["samples_ts"].as_array().unwrap().len(), 2);
        assert!(r["avg_ts"].as_f64().unwrap() > 0.0 && r["stddev_ts"].as_f64().unwrap() >= 0.0);
        assert!(r["model_filename"].as_str().unwrap().ends_with(SMOLLM2));
    }
    let md = stdout(&tessera(&[
        "bench",
        "-m",
        m.to_str().unwrap(),
        "-p",
        "8",
        "-n",
        "0",
        "-r",
        "1",
        "-t",
        "1",
    ]));
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(
        lines[0],
        "| model | size | params | backend | threads | test | t/s |"
    );
    assert!(
        lines[2].starts_with("| llama 135M Q4_1 | 92.10 MiB | 134.52 M | CPU | 1 | pp8 | "),
        "{md}"
    );
}

#[test]
fn perplexity_prints_running_estimates_and_final_line() {
    let m = model(SMOLLM2);
    let o = tessera(&[
        "perplexity",
        "-m",
        m.to_str().unwrap(),
        "-f",
        "/usr/share/common-licenses/GPL-3",
        "-c",
        "64",
        "--chunks",
        "2",
        "-t",
        "2",
    ]);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("[1]") && lines[0].contains(",[2]"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("Final estimate: PPL = ") && lines[1].contains(" +/- "),
        "{out}"
    );
    let o = tessera(&[
        "perplexity",
        "-m",
        m.to_str().unwrap(),
        "-f",
        "/nonexistent.txt",
    ]);
    assert_one_line_error(&o, "/nonexistent.txt");
}

#[test]
fn bench_spec_compares_each_type_with_plain_decoding() {
    let m = model(SMOLLM2);
    let prompt =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/prompts/rewrite_code.txt");
    let out = stdout(&tessera(&[
        "bench-spec",
        "-m",
        m.to_str().unwrap(),
        "-f",
        prompt.to_str().unwrap(),
        "-n",
        "24",
        "-t",
        "1",
        "--types",
        "ngram-simple",
    ]));
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(2)
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    // | type | tokens | target steps | gen s | tokens/s | speed-up | acceptance | identical |
    assert_eq!(
        (rows[0][1], rows[0][2], rows[0][3]),
        ("none", "24", "23"),
        "{out}"
    );
    assert_eq!((rows[1][1], rows[1][2]), ("ngram-simple", "24"), "{out}");
    assert_eq!(rows[1][8], "yes", "{out}");
}

/// A `tessera serve` process, killed when dropped (also when a test fails).
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tessera serve ARGS` on an ephemeral port (through `sh -c` so that `shell` may set limits
/// first, e.g. `ulimit -n 64;`), and its URL once it listens.
fn start_serve(shell: &str, args: &[&str]) -> (Served, String) {
    use std::io::BufRead as _;
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "{shell} exec '{}' serve --port 0 {}",
        env!("CARGO_BIN_EXE_tessera"),
        quoted.join(" ")
    );
    let mut server = Served(
        Command::new("sh")
            .args(["-c", &script])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start tessera serve"),
    );
    let mut stderr = std::io::BufReader::new(server.0.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server exited"
        );
        if let Some(url) = line.trim().strip_prefix("listening on ") {
            break url.to_string();
        }
    };
    // The server keeps logging: drain its stderr so that it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (server, url)
}

/// A process's resident memory (`VmRSS`) or its peak (`VmHWM`) in KiB (Linux).
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// Running out of file descriptors (64 here, held by idle connections) does not stop the
/// server: it closes idle connections to answer new ones.
#[test]
fn serve_answers_when_file_descriptors_run_out() {
    use std::io::{Read as _, Write as _};
    let path = model(SMOLLM2);
    let (server, url) = start_serve(
        "ulimit -n 64 &&",
        &["-m", path.to_str().unwrap(), "-c", "512", "-t", "1"],
    );
    let authority = url.strip_prefix("http://").unwrap().to_string();
    let idle: Vec<_> = (0..100)
        .filter_map(|_| std::net::TcpStream::connect(&authority).ok())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut s = std::net::TcpStream::connect(&authority).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(8)))
        .unwrap();
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let read = s.read_to_string(&mut response);
    drop(server);
    drop(idle);
    assert!(read.is_ok(), "no answer: {read:?}");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

/// What the largest requests raise the server's peak memory by, as multiples of their bodies
/// (docs/serve.md states the bounds): a body just under the 8 MiB limit whose bulk is an
/// unknown field (skipped, never built into a JSON tree), then `/tokenize`'s largest content
/// (1 MiB) with pieces.
#[test]
fn serve_peak_memory_is_bounded_by_the_body() {
    let path = model(SMOLLM2);
    let (server, url) = start_serve("", &["-m", path.to_str().unwrap(), "-c", "512"]);
    // Loaded (the model loads after the server starts listening), and the allocator's pools
    // made by small requests first.
    post_json(&url, "/tokenize", r#"{"content": "warm up"}"#);
    post_json(
        &url,
        "/v1/completions",
        r#"{"prompt": "Hi", "max_tokens": 1}"#,
    );
    let grown_by = |path: &str, body: &str| {
        let before = memory_kib(server.0.id(), "VmRSS:");
        let answer = post_json(&url, path, body);
        let peak = memory_kib(server.0.id(), "VmHWM:");
        let grown = (peak.saturating_sub(before) * 1024) as f64 / body.len() as f64;
        eprintln!(
            "{path} of {} bytes: peak {peak} KiB, {before} KiB before ({grown:.1}x the body)",
            body.len()
        );
        (answer, grown)
    };
    let padding = "0,".repeat(4_000_000);
    let unknown = format!(r#"{{"prompt": "Hi", "max_tokens": 1, "padding": [{padding}0]}}"#);
    let (answer, grown) = grown_by("/v1/completions", &unknown);
    assert!(answer["choices"].is_array(), "{answer}");
    assert!(
        grown <= 6.0,
        "an unknown field grew the peak by {grown:.1}x the body"
    );
    let content = "The quick brown fox jumps over the lazy dog. ".repeat((1 << 20) / 46);
    let body = serde_json::json!({"content": content, "with_pieces": true}).to_string();
    let (answer, grown) = grown_by("/tokenize", &body);
    let n = answer["tokens"].as_array().unwrap().len();
    assert!(n > 200_000, "{n} tokens");
    assert!(
        grown <= 32.0,
        "/tokenize grew the peak by {grown:.1}x the body"
    );
}

/// `tessera serve` on an ephemeral port, driven by `tessera load-test`: streams complete with
/// no error, and the greedy chat answer is `tessera run --chat`'s text.
#[test]
fn serve_answers_as_run_chat_and_under_load() {
    let path = model(SMOLLM2);
    let (server, url) = start_serve(
        "",
        &[
            "-m",
            path.to_str().unwrap(),
            "-c",
            "1024",
            "-np",
            "2",
            "-t",
            "2",
        ],
    );
    let out = tessera(&[
        "load-test",
        "--url",
        &url,
        "--clients",
        "2",
        "--duration",
        "3",
        "--max-tokens",
        "8",
        "--json",
        "--server-pid",
        &server.0.id().to_string(),
    ]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["errors"], 0, "{report}");
    assert!(report["tokens"].as_u64().unwrap() > 0, "{report}");
    assert!(
        report["server_rss_mib_after"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    // The server's greedy chat answer is `tessera run --chat`'s.
    let run = stdout(&tessera(&[
        "run",
        "-m",
        path.to_str().unwrap(),
        "--chat",
        "-p",
        "Name a fruit.",
        "-n",
        "12",
        "--temp",
        "0",
        "-c",
        "512",
    ]));
    let body = serde_json::json!({"messages": [{"role": "user", "content": "Name a fruit."}], "max_tokens": 12, "temperature": 0});
    let answer = post_json(&url, "/v1/chat/completions", &body.to_string());
    drop(server);
    assert_eq!(
        answer["choices"][0]["message"]["content"].as_str().unwrap(),
        run.trim_end_matches('\n')
    );
}

/// POSTs `body` to `url` + `path` (HTTP/1.1, `Connection: close`) and parses the JSON answer.
fn post_json(url: &str, path: &str, body: &str) -> serde_json::Value {
    use std::io::{Read as _, Write as _};
    let authority = url.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (_, json) = response.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {response}"))
}

/// `tessera devices` always lists the CUDA section: here, with no NVIDIA driver, one line.
#[test]
fn devices_lists_cuda_or_says_no_driver() {
    let out = stdout(&tessera(&["devices"]));
    let cuda = out.split("cuda:\n").nth(1).expect("a cuda section");
    if !tessera_backend_cuda::libs::driver_present() {
        assert_eq!(cuda.lines().next(), Some("  CUDA: no driver"), "{out}");
    }
}

/// `--backend cuda` without a driver is one clear line, not a panic.
#[test]
fn backend_cuda_without_driver_is_one_line_error() {
    if tessera_backend_cuda::libs::driver_present() {
        return;
    }
    let m = model(SMOLLM2);
    let o = tessera(&[
        "run",
        "-m",
        m.to_str().unwrap(),
        "-n",
        "1",
        "--backend",
        "cuda",
        "hi",
    ]);
    assert_one_line_error(&o, "CUDA: no driver");
}
