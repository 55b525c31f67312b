//! `tessera serve` over real sockets on 127.0.0.1 (ephemeral ports): the OpenAI endpoints on
//! SmolLM2 against the runtime's own output, parallel slots, and a suite of hostile requests.

mod client;
mod endpoints;
mod hostile;
mod limits;
mod models;
mod presets;
mod slots;
mod structured;
mod tools;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use tessera_core::{Context, Model};
use tessera_serve::{Access, ModelHost, ModelSpec, Registry, Settings};

pub const KEY: &str = "test-key-123";
pub const ALLOWED: &str = "http://allowed.test";
/// Context of each of the shared server's two slots.
pub const N_CTX_SLOT: usize = 512;

/// Loads models with the test kit, on the CPU backend with two threads.
pub struct TestHost;

impl ModelHost for TestHost {
    fn load(&self, spec: &ModelSpec) -> Result<Arc<Model>, String> {
        let path = tessera_testkit::models_dir().join(&spec.path);
        if !path.exists() {
            return Err(format!("{} does not exist", path.display()));
        }
        Ok(tessera_testkit::load_model(spec.path.to_str().unwrap()))
    }

    fn context(
        &self,
        _: &ModelSpec,
        model: &Arc<Model>,
        n_ctx: usize,
        n_seq: usize,
    ) -> Result<Context, String> {
        Ok(tessera_testkit::multi_context(model, n_ctx, 512, 2, n_seq))
    }
}

pub fn smollm2_spec(parallel: usize) -> ModelSpec {
    ModelSpec {
        name: "smollm2".into(),
        path: tessera_testkit::SMOLLM2.into(),
        n_ctx: N_CTX_SLOT * parallel,
        parallel,
        load_on_startup: true,
        context_shift: false,
    }
}

/// Serves `registry` on an ephemeral port from a thread of its own for the rest of the tests
/// (a 64 KiB body limit, the other settings the server's defaults).
pub fn start(registry: Arc<Registry>, access: Access) -> SocketAddr {
    let settings = Settings {
        body_limit: 64 << 10,
        ..Settings::new(access)
    };
    start_with(registry, settings)
}

/// [`start`] with `settings`.
pub fn start_with(registry: Arc<Registry>, settings: Settings) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let limits = settings.limits;
            let app = tessera_serve::router(registry, settings);
            tessera_serve::serve(listener, app, limits, std::future::pending()).await;
        });
    });
    rx.recv().unwrap()
}

/// The shared server: SmolLM2 in two slots, an API key and one allowed origin.
pub fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let registry = Registry::new(vec![smollm2_spec(2)], Arc::new(TestHost), 8);
        registry.load_startup_models();
        let addr = start(
            registry,
            Access {
                api_key: Some(KEY.into()),
                allowed_origins: vec![ALLOWED.into()],
                ..Access::default()
            },
        );
        client::wait_healthy(addr);
        addr
    })
}
