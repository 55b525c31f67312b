//! The endpoints: health, the model list, chat and text completions, tokenize and detokenize.
//! Bodies are read as bytes and parsed here so that every failure, the body limit's included,
//! answers in the OpenAI error shape.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tessera_runtime::generate::tokenize_chat_with;

use crate::error::ApiError;
use crate::request::{
    self, ChatRequest, CompletionRequest, DetokenizeRequest, Prompt, TokenizeRequest,
};
use crate::stream::{self, Kind};
use crate::App;

type Body = Result<Bytes, BytesRejection>;

/// The body's bytes, or the rejection (413 over the limit) as an API error.
fn bytes(body: Body) -> Result<Bytes, ApiError> {
    body.map_err(|r| ApiError::new(r.status(), "invalid_request_error", r.body_text()))
}

fn answer(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

/// `{"status": "ok"}`, or 503 while a start-up model is loading (llama-server's contract).
pub async fn health(State(app): State<Arc<App>>) -> Response {
    if app.registry.startup_models_ready() {
        Json(json!({"status": "ok"})).into_response()
    } else {
        ApiError::unavailable("Loading model").into_response()
    }
}

pub async fn models(State(app): State<Arc<App>>) -> Response {
    let data: Vec<_> = app
        .registry
        .list()
        .into_iter()
        .map(|(spec, state)| {
            json!({
                "id": spec.name,
                "object": "model",
                "created": 0,
                "owned_by": "tessera",
                "status": {"value": state.word()},
            })
        })
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

pub async fn chat_completions(State(app): State<Arc<App>>, body: Body) -> Response {
    answer(chat(app, body).await)
}

async fn chat(app: Arc<App>, body: Body) -> Result<Response, ApiError> {
    let (req, options): (ChatRequest, _) = request::parse_with_options(&bytes(body)?)?;
    options.check_supported()?;
    let messages = request::chat_messages(&req.messages)?;
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let template = loaded
        .template
        .as_ref()
        .ok_or_else(|| ApiError::invalid("the model has no chat template: use /v1/completions"))?;
    let prompt = tokenize_chat_with(
        loaded.model.tokenizer(),
        template,
        &messages,
        options.parse_special_in_content,
    )
    .map_err(|e| ApiError::invalid(e.to_string()))?;
    stream::run(&app, &loaded, prompt, &options, Kind::Chat).await
}

pub async fn completions(State(app): State<Arc<App>>, body: Body) -> Response {
    answer(completion(app, body).await)
}

async fn completion(app: Arc<App>, body: Body) -> Result<Response, ApiError> {
    let (req, options): (CompletionRequest, _) = request::parse_with_options(&bytes(body)?)?;
    options.check_supported()?;
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let prompt = match req.prompt {
        Prompt::Text(text) => loaded.model.tokenizer().encode(&text, true, true),
        Prompt::Tokens(ids) => ids,
    };
    stream::run(&app, &loaded, prompt, &options, Kind::Completion).await
}

pub async fn tokenize(State(app): State<Arc<App>>, body: Body) -> Response {
    answer(tokenize_body(app, body).await)
}

async fn tokenize_body(app: Arc<App>, body: Body) -> Result<Response, ApiError> {
    let req: TokenizeRequest = request::parse(&bytes(body)?)?;
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let tok = loaded.model.tokenizer();
    let ids = tok.encode(&req.content, req.add_special, req.parse_special);
    let tokens: Vec<_> = if req.with_pieces {
        ids.iter()
            .map(|&id| {
                let piece = String::from_utf8_lossy(&tok.token_to_piece(id, true)).into_owned();
                json!({"id": id, "piece": piece})
            })
            .collect()
    } else {
        ids.iter().map(|&id| json!(id)).collect()
    };
    Ok(Json(json!({"tokens": tokens})).into_response())
}

pub async fn detokenize(State(app): State<Arc<App>>, body: Body) -> Response {
    answer(detokenize_body(app, body).await)
}

async fn detokenize_body(app: Arc<App>, body: Body) -> Result<Response, ApiError> {
    let req: DetokenizeRequest = request::parse(&bytes(body)?)?;
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let n_vocab = loaded.model.n_vocab();
    if let Some(&id) = req.tokens.iter().find(|&&id| id as usize >= n_vocab) {
        return Err(ApiError::invalid(format!(
            "token {id} is not below the vocabulary size {n_vocab}"
        )));
    }
    let content = loaded.model.tokenizer().decode(&req.tokens, true);
    Ok(Json(json!({"content": content})).into_response())
}

pub async fn not_found(uri: Uri) -> Response {
    ApiError::not_found(format!("no endpoint {}", uri.path())).into_response()
}

/// A fresh number (response ids; seeds of requests that give none, mixed with the time).
pub fn next_number(app: &App) -> u64 {
    app.counter.fetch_add(1, Ordering::Relaxed)
}
