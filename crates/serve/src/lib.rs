//! `tessera serve`: the companion host. An OpenAI-compatible HTTP server (tokio + axum) over
//! the same runtime the CLI and the browser package drive, so that a web page on the same
//! machine can hand its requests to a native engine (bigger models, native speed).
//!
//! - [`request`]: the request bodies, parsed and range-checked (a bad field is a 400).
//! - [`listen`]: the connections: time limits, a cap, room made when descriptors run out.
//! - [`security`]: who may call (host, origins, API key) — a page is a hostile client until
//!   allowed.
//! - [`models`]: the models offered (one, or a preset file's), loaded at start or on demand.
//! - [`slots`]: per model, the thread that owns its contexts and steps its requests in turn.
//! - [`routes`]: the endpoints; [`stream`] runs one generation as a JSON answer or SSE chunks.
//! - [`preset`]: llama-server's `--models-preset` INI format.

pub mod answer;
mod error;
pub mod listen;
pub mod models;
pub mod preset;
pub mod request;
pub mod routes;
pub mod security;
pub mod slots;
pub mod stream;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

pub use error::ApiError;
pub use listen::{serve, Limits};
pub use models::{ModelHost, ModelSpec, Registry};
pub use security::Access;

/// Requests doing CPU work at once ([`App::cpu_work`]).
const CPU_WORKERS: usize = 2;

/// Request bodies above this are refused with 413 (a long chat history is far below it).
pub const DEFAULT_BODY_LIMIT: usize = 8 << 20;

/// `/tokenize` content above this is refused with 413: its answer (ids, or pieces) is several
/// times its size.
pub const DEFAULT_TOKENIZE_LIMIT: usize = 1 << 20;

/// How the server bounds what a request may take.
#[derive(Clone, Debug)]
pub struct Settings {
    pub access: Access,
    pub body_limit: usize,
    pub tokenize_limit: usize,
    pub limits: Limits,
    /// Most tokens one answer generates, whatever it asks (`None`: one slot's context, which
    /// also bounds answers that shift their context).
    pub max_generated: Option<usize>,
    /// Reuse a slot's cache across callers (origins): faster for one user's several pages,
    /// but a page can then time another's prompt.
    pub share_prefix_cache: bool,
}

impl Settings {
    pub fn new(access: Access) -> Settings {
        Settings {
            access,
            body_limit: DEFAULT_BODY_LIMIT,
            tokenize_limit: DEFAULT_TOKENIZE_LIMIT,
            limits: Limits::default(),
            max_generated: None,
            share_prefix_cache: false,
        }
    }
}

/// The server's shared state.
pub struct App {
    pub registry: Arc<Registry>,
    pub settings: Settings,
    /// Numbers response ids and seeds requests that give none.
    pub counter: AtomicU64,
    /// CPU work of requests (parsing large bodies, templates, tokenizing) runs on blocking
    /// threads, at most this many at once, so the async threads stay free for I/O.
    pub cpu_work: Arc<tokio::sync::Semaphore>,
}

/// The server's endpoints behind the access guard.
pub fn router(registry: Arc<Registry>, settings: Settings) -> Router {
    let (access, body_limit) = (settings.access.clone(), settings.body_limit);
    let app = Arc::new(App {
        registry,
        settings,
        counter: AtomicU64::new(0),
        cpu_work: Arc::new(tokio::sync::Semaphore::new(CPU_WORKERS)),
    });
    Router::new()
        .route("/health", get(routes::health))
        .route("/v1/health", get(routes::health))
        .route("/v1/models", get(routes::models))
        .route("/models", get(routes::models))
        .route("/v1/chat/completions", post(routes::chat_completions))
        .route("/chat/completions", post(routes::chat_completions))
        .route("/v1/completions", post(routes::completions))
        .route("/completions", post(routes::completions))
        .route("/tokenize", post(routes::tokenize))
        .route("/detokenize", post(routes::detokenize))
        .fallback(routes::not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(security::Guard { access, body_limit }),
            security::guard,
        ))
}
