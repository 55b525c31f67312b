//! Several models from a preset file: start-up loads, loads on the first request naming a
//! model, the states `/v1/models` shows, and the health check while a model loads.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tessera_core::{Context, Model};
use tessera_serve::preset::{self, Defaults};
use tessera_serve::{Access, ModelHost, ModelSpec, Registry};

use crate::client::{get, post, wait_healthy};
use crate::{start, TestHost};

/// A host whose loads wait until the test opens the gate.
struct GatedHost {
    gate: Arc<Mutex<()>>,
}

impl ModelHost for GatedHost {
    fn load(&self, spec: &ModelSpec) -> Result<Arc<Model>, String> {
        let _open = self.gate.lock().unwrap();
        TestHost.load(spec)
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

fn states(addr: std::net::SocketAddr) -> Vec<(String, String)> {
    get(addr, "/v1/models").json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().into(),
                m["status"]["value"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn startup_and_on_demand_models() {
    let text = format!(
        "version = 1\n[*]\nc = 512\n[first]\nmodel = {0}\nload-on-startup = true\n[second]\nmodel = {0}\n[broken]\nmodel = /nonexistent.gguf\n",
        tessera_testkit::SMOLLM2
    );
    let defaults = Defaults {
        context_shift: false,
        n_ctx: 4096,
        n_ctx_explicit: false,
        parallel: 1,
        parallel_explicit: false,
    };
    let (specs, _) = preset::parse(Path::new("test.ini"), &text, &defaults).unwrap();
    let gate = Arc::new(Mutex::new(()));
    let closed = gate.lock().unwrap();
    let registry = Registry::new(specs, Arc::new(GatedHost { gate: gate.clone() }), 4);
    registry.load_startup_models();
    let addr = start(registry, Access::default());
    // The start-up model is loading: not healthy yet.
    let h = get(addr, "/health");
    assert_eq!(h.status, 503);
    assert_eq!(h.error_type(), "unavailable_error");
    assert_eq!(
        states(addr),
        [
            ("first".into(), "loading".into()),
            ("second".into(), "unloaded".into()),
            ("broken".into(), "unloaded".into())
        ]
    );
    drop(closed);
    wait_healthy(addr);
    assert_eq!(states(addr)[1].1, "unloaded");
    // A request naming the second model loads it.
    let body = json!({"model": "second", "prompt": "Hello", "max_tokens": 2, "temperature": 0});
    let r = post(addr, "/v1/completions", &body.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["model"], "second");
    assert_eq!(states(addr)[1].1, "loaded");
    // An unknown name is a 404; a model that cannot load, a 503 that names no file (the
    // reason is in the server log).
    let body = json!({"model": "third", "prompt": "Hello", "max_tokens": 2});
    assert_eq!(post(addr, "/v1/completions", &body.to_string()).status, 404);
    let body = json!({"model": "broken", "prompt": "Hello", "max_tokens": 2});
    let r = post(addr, "/v1/completions", &body.to_string());
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(!r.body.contains("nonexistent.gguf"), "{}", r.body);
    assert_eq!(states(addr)[2].1, "failed");
}
