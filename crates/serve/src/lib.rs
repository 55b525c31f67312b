//! `tessera serve`: the companion host. An OpenAI-compatible HTTP server (tokio + axum) over
//! the same runtime the CLI and the browser package drive, so that a web page on the same
//! machine can hand its requests to a native engine (bigger models, native speed).
//!
//! - [`request`]: the request bodies, parsed and range-checked (a bad field is a 400).
//! - [`security`]: who may call (origins, API key) — a page is a hostile client until allowed.
//! - [`models`]: the models offered (one, or a preset file's), loaded at start or on demand.
//! - [`slots`]: per model, the thread that owns its contexts and steps its requests in turn.
//! - [`routes`]: the endpoints; [`stream`] runs one generation as a JSON answer or SSE chunks.
//! - [`preset`]: llama-server's `--models-preset` INI format.

pub mod error;
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
pub use models::{ModelHost, ModelSpec, Registry};
pub use security::Access;

/// Request bodies above this are refused with 413 (a long chat history is far below it).
pub const DEFAULT_BODY_LIMIT: usize = 8 << 20;

/// The server's shared state.
pub struct App {
    pub registry: Arc<Registry>,
    /// Numbers response ids and seeds requests that give none.
    pub counter: AtomicU64,
}

/// The server's endpoints behind the access guard.
pub fn router(registry: Arc<Registry>, access: Access, body_limit: usize) -> Router {
    let app = Arc::new(App {
        registry,
        counter: AtomicU64::new(0),
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
