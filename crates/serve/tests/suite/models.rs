//! Preset models against hostile callers: the cap on loaded models (least recently used idle
//! model unloaded, its memory freed; a busy one kept), the back-off after a failed load, errors
//! that name no file, and loads that need the key.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_core::{Context, Model};
use tessera_serve::models::ModelLimits;
use tessera_serve::{Access, ModelHost, ModelSpec, Registry};

use crate::client::{build, get, post, request, send_raw, wait_healthy};
use crate::{start, TestHost, KEY};

/// The test host, recording each load: the model's name and a weak reference to it (dead once
/// the registry and the slots have let it go).
#[derive(Default)]
struct CountingHost {
    loads: Mutex<Vec<(String, Weak<Model>)>>,
}

impl CountingHost {
    fn loads(&self) -> Vec<String> {
        let loads = self.loads.lock().unwrap();
        loads.iter().map(|(name, _)| name.clone()).collect()
    }

    /// Whether every model loaded under `name` has been freed.
    fn freed(&self, name: &str) -> bool {
        let loads = self.loads.lock().unwrap();
        loads
            .iter()
            .filter(|(n, _)| n == name)
            .all(|(_, m)| m.strong_count() == 0)
    }
}

impl ModelHost for CountingHost {
    fn load(&self, spec: &ModelSpec) -> Result<Arc<Model>, String> {
        let loaded = TestHost.load(spec);
        let weak = loaded.as_ref().map(Arc::downgrade).unwrap_or_default();
        self.loads.lock().unwrap().push((spec.name.clone(), weak));
        loaded
    }

    fn context(
        &self,
        spec: &ModelSpec,
        model: &Arc<Model>,
        n_ctx: usize,
        n_seq: usize,
    ) -> Result<Context, String> {
        TestHost.context(spec, model, n_ctx, n_seq)
    }
}

/// A preset model: SmolLM2 in one slot of 512 positions, or a missing file.
fn spec(name: &str, path: &str) -> ModelSpec {
    ModelSpec {
        name: name.into(),
        path: path.into(),
        n_ctx: 512,
        parallel: 1,
        load_on_startup: false,
        context_shift: false,
    }
}

fn smollm2(name: &str) -> ModelSpec {
    spec(name, tessera_testkit::SMOLLM2)
}

const MISSING: &str = "/nonexistent-h48/models/broken.gguf";

fn serve(
    specs: Vec<ModelSpec>,
    limits: ModelLimits,
    access: Access,
) -> (SocketAddr, Arc<CountingHost>) {
    let host = Arc::new(CountingHost::default());
    let registry = Registry::with_limits(specs, host.clone(), limits);
    registry.load_startup_models();
    (start(registry, access), host)
}

fn limits(models_max: usize) -> ModelLimits {
    ModelLimits {
        models_max,
        ..ModelLimits::new(4)
    }
}

fn complete(addr: SocketAddr, model: &str) -> crate::client::Response {
    let body = json!({"model": model, "prompt": "Hello", "max_tokens": 2, "temperature": 0});
    post(addr, "/v1/completions", &body.to_string())
}

/// Each model's `/v1/models` state word, in order.
fn states(addr: SocketAddr) -> Vec<String> {
    get(addr, "/v1/models").json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"]["value"].as_str().unwrap().to_string())
        .collect()
}

fn retry_after(r: &crate::client::Response) -> u64 {
    r.header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", r.headers))
        .parse()
        .unwrap()
}

/// Polls `check` for up to 30 s.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let t = Instant::now();
    while !check() {
        assert!(t.elapsed() < Duration::from_secs(30), "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A model that cannot load answers 503 naming neither its file nor the host's error, and is
/// not loaded again before its back-off ends (which then doubles).
#[test]
fn a_failed_model_waits_out_its_back_off_and_names_no_file() {
    let limits = ModelLimits {
        retry_first: Duration::from_secs(2),
        ..limits(4)
    };
    let (addr, host) = serve(
        vec![smollm2("good"), spec("broken", MISSING)],
        limits,
        Access::default(),
    );
    let r = complete(addr, "broken");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.error_type(), "unavailable_error");
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(
        message,
        "model \"broken\" failed to load; see the server log"
    );
    // Neither the file, nor its directory, nor the test host's "... does not exist".
    for leak in ["nonexistent-h48", "broken.gguf", "does not exist", "/"] {
        assert!(!r.body.contains(leak), "{leak:?} in {}", r.body);
    }
    assert_eq!(retry_after(&r), 2);
    assert_eq!(host.loads(), ["broken"]);
    // Within the back-off: 503 at once, no second load, from every endpoint.
    let r = complete(addr, "broken");
    assert_eq!(r.status, 503, "{}", r.body);
    assert!((1..=2).contains(&retry_after(&r)));
    let tokenize = json!({"model": "broken", "content": "hi"}).to_string();
    assert_eq!(post(addr, "/tokenize", &tokenize).status, 503);
    assert_eq!(host.loads(), ["broken"]);
    assert_eq!(states(addr), ["unloaded", "failed"]);
    let listed = &get(addr, "/v1/models").json()["data"][1];
    assert!(!listed.to_string().contains("nonexistent"), "{listed}");
    // Past it: one more load, which fails again and doubles the back-off.
    std::thread::sleep(Duration::from_millis(2100));
    let r = complete(addr, "broken");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(host.loads(), ["broken", "broken"]);
    assert!((3..=4).contains(&retry_after(&r)), "{:?}", r.headers);
    // The other model is unaffected.
    assert_eq!(complete(addr, "good").status, 200);
}

/// Past `models_max`, loading a model unloads the least recently used idle one and frees it;
/// the health check stays ok when the unloaded model was a start-up one.
#[test]
fn the_least_recently_used_model_makes_room_and_is_freed() {
    let mut first = smollm2("a");
    first.load_on_startup = true;
    let (addr, host) = serve(
        vec![first, smollm2("b"), smollm2("c")],
        limits(2),
        Access::default(),
    );
    wait_healthy(addr);
    assert_eq!(complete(addr, "b").status, 200);
    assert_eq!(states(addr), ["loaded", "loaded", "unloaded"]);
    // `a` used last: `b` is the least recently used.
    assert_eq!(complete(addr, "a").status, 200);
    let r = complete(addr, "c");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(states(addr), ["loaded", "unloaded", "loaded"]);
    eventually("b's model and contexts freed", || host.freed("b"));
    assert!(!host.freed("a") && !host.freed("c"));
    // `b` again: now `a` is the least recently used, a start-up model; /health stays ok.
    assert_eq!(complete(addr, "b").status, 200);
    assert_eq!(states(addr), ["unloaded", "loaded", "loaded"]);
    eventually("a's model freed", || host.freed("a"));
    assert_eq!(host.loads(), ["a", "b", "c", "b"]);
    assert_eq!(request(addr, "GET", "/health", &[], "").status, 200);
}

/// Opens a streamed completion of `model` and reads up to its first chunk: it runs.
fn open_stream(addr: SocketAddr, model: &str) -> BufReader<TcpStream> {
    let body = json!({"model": model, "prompt": "Once upon a time", "max_tokens": 400,
                      "ignore_eos": true, "stream": true, "temperature": 0});
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(build("POST", "/v1/completions", &[], &body.to_string()).as_bytes())
        .unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains(" 200 "), "{line}");
    while !line.starts_with("data: ") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "no chunk");
    }
    reader
}

/// A model that serves a request (here a stream, which outlives its handler) is not unloaded
/// to make room: the other model gets 503 with `Retry-After` until the stream ends.
#[test]
fn a_busy_model_is_not_unloaded() {
    let (addr, host) = serve(
        vec![smollm2("a"), smollm2("b")],
        limits(1),
        Access::default(),
    );
    let stream = open_stream(addr, "a");
    let r = complete(addr, "b");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.error_type(), "unavailable_error");
    assert!(r.body.contains("--models-max"), "{}", r.body);
    assert_eq!(retry_after(&r), 1);
    assert_eq!(states(addr), ["loaded", "unloaded"]);
    assert_eq!(host.loads(), ["a"]);
    // The client leaves: its generation is cancelled, `a` is idle and makes room.
    drop(stream);
    eventually("b loads once a is idle", || {
        complete(addr, "b").status == 200
    });
    assert_eq!(states(addr), ["unloaded", "loaded"]);
    assert_eq!(host.loads(), ["a", "b"]);
    eventually("a's model freed", || host.freed("a"));
}

/// A request without the key (or with a wrong one) is refused before it can start a load.
#[test]
fn loading_needs_the_key() {
    let access = Access {
        api_key: Some(KEY.into()),
        ..Access::default()
    };
    let (addr, host) = serve(vec![smollm2("a"), smollm2("b")], limits(4), access);
    let body = json!({"model": "b", "prompt": "Hello", "max_tokens": 2}).to_string();
    let no_key = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(send_raw(addr, no_key.as_bytes()).status, 401);
    let wrong = [("Authorization", "Bearer not-the-key")];
    assert_eq!(
        request(addr, "POST", "/v1/completions", &wrong, &body).status,
        401
    );
    let tokenize = json!({"model": "b", "content": "hi"}).to_string();
    assert_eq!(
        request(addr, "POST", "/tokenize", &wrong, &tokenize).status,
        401
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(host.loads().is_empty(), "{:?}", host.loads());
    assert_eq!(states(addr), ["unloaded", "unloaded"]);
    // With the key it loads.
    assert_eq!(post(addr, "/v1/completions", &body).status, 200);
    assert_eq!(host.loads(), ["b"]);
}

/// `/health` and `/v1/health` answer alike, without the key as with it.
#[test]
fn health_and_v1_health_answer_alike() {
    let access = Access {
        api_key: Some(KEY.into()),
        ..Access::default()
    };
    let mut a = smollm2("a");
    a.load_on_startup = true;
    let (addr, _) = serve(vec![a], limits(4), access);
    wait_healthy(addr);
    let no_key = |path: &str| {
        let raw = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        send_raw(addr, raw.as_bytes())
    };
    for path in ["/health", "/v1/health"] {
        let (bare, keyed) = (no_key(path), get(addr, path));
        assert_eq!((bare.status, keyed.status), (200, 200), "{path}");
        assert_eq!(bare.json(), json!({"status": "ok"}), "{path}");
    }
}

#[test]
fn start_up_models_must_fit_under_the_cap() {
    let mut specs = vec![smollm2("a"), smollm2("b"), smollm2("c")];
    for s in &mut specs {
        s.load_on_startup = true;
    }
    assert!(limits(3).check_startup(&specs).is_ok());
    assert!(limits(0).check_startup(&specs).is_ok());
    let e = limits(2).check_startup(&specs).unwrap_err();
    assert_eq!(e, "3 models load on start-up, more than --models-max 2");
}
