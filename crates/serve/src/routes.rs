//! The endpoints: health, the model list, chat and text completions, tokenize and detokenize.
//! Bodies are read here (within the size limit and the time their length allows) and parsed
//! so that every failure answers in the OpenAI error shape. Parsing, templates and tokenizing
//! run on blocking threads ([`cpu`]): the async threads only do I/O, so `/health` and other
//! clients are answered while a large request is worked on.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tessera_runtime::request::prepare_chat;

use crate::answer::ChatPlan;
use crate::error::ApiError;
use crate::request::{
    self, ChatRequest, CompletionRequest, DetokenizeRequest, Prompt, TokenizeRequest,
};
use crate::stream::{self, Kind};
use crate::App;

/// The body, refused past the size limit (413) or when it arrives slower than the limits allow.
async fn read_body(app: &App, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let limit = app.settings.body_limit;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(limit as u64);
    let deadline = app
        .settings
        .limits
        .body_deadline(declared.min(limit as u64));
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            format!("the body did not arrive within {} s", deadline.as_secs()),
        )),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) if is_over_limit(&e) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the body is over the limit of {limit} bytes"),
        )),
        Ok(Err(_)) => Err(ApiError::invalid("the body could not be read")),
    }
}

fn is_over_limit(e: &axum::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Runs `work` on a blocking thread, at most [`App::cpu_work`] at once. The permit goes with
/// the work: a request whose client left still holds it until its work ends.
pub(crate) async fn cpu<T: Send + 'static>(
    app: &App,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let permit = app
        .cpu_work
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| ApiError::internal("the server is stopping"))?;
    tokio::task::spawn_blocking(move || {
        let out = work();
        drop(permit);
        out
    })
    .await
    .map_err(|_| ApiError::internal("a request's work failed"))
}

/// Who is asking, for the slots' cache ownership: the page's origin, empty for a process.
fn caller(app: &App, headers: &HeaderMap) -> String {
    match app.settings.share_prefix_cache {
        true => String::new(),
        false => headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
    }
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

pub async fn chat_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    answer(chat(app, headers, body).await)
}

async fn chat(app: Arc<App>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let bytes = read_body(&app, &headers, body).await?;
    let (req, options) = cpu(&app, move || {
        let (req, options): (ChatRequest, _) = request::parse_with_options(&bytes)?;
        options.check_supported()?;
        Ok::<_, ApiError>((req, options))
    })
    .await??;
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let (prompt, plan) = {
        let loaded = loaded.clone();
        let options = options.clone();
        cpu(&app, move || {
            let messages = request::chat_messages(&req.messages)?;
            let template = loaded.template.as_ref().ok_or_else(|| {
                ApiError::invalid("the model has no chat template: use /v1/completions")
            })?;
            let prepared = prepare_chat(&options, loaded.model.tokenizer(), template, messages)
                .map_err(|e| ApiError::invalid(e.to_string()))?;
            let plan = ChatPlan {
                grammar: prepared.grammar,
                output: prepared.output,
            };
            Ok::<_, ApiError>((prepared.prompt, plan))
        })
        .await??
    };
    let caller = caller(&app, &headers);
    stream::run(&app, &loaded, prompt, &options, Kind::Chat, caller, plan).await
}

pub async fn completions(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    answer(completion(app, headers, body).await)
}

async fn completion(app: Arc<App>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let bytes = read_body(&app, &headers, body).await?;
    let (req, options) = cpu(&app, move || {
        let (req, options): (CompletionRequest, _) = request::parse_with_options(&bytes)?;
        options.check_supported()?;
        Ok::<_, ApiError>((req, options))
    })
    .await??;
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let prompt = match req.prompt {
        Prompt::Text(text) => {
            let loaded = loaded.clone();
            cpu(&app, move || {
                loaded.model.tokenizer().encode(&text, true, true)
            })
            .await?
        }
        Prompt::Tokens(ids) => ids,
    };
    let caller = caller(&app, &headers);
    stream::run(
        &app,
        &loaded,
        prompt,
        &options,
        Kind::Completion,
        caller,
        ChatPlan::default(),
    )
    .await
}

pub async fn tokenize(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    answer(tokenize_body(app, headers, body).await)
}

async fn tokenize_body(
    app: Arc<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_body(&app, &headers, body).await?;
    let req: TokenizeRequest = cpu(&app, move || request::parse(&bytes)).await??;
    let limit = app.settings.tokenize_limit;
    if req.content.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!(
                "'content' has {} bytes; /tokenize takes at most {limit}",
                req.content.len()
            ),
        ));
    }
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let json = cpu(&app, move || {
        let tok = loaded.model.tokenizer();
        let ids = tok.encode(&req.content, req.add_special, req.parse_special);
        drop(req.content);
        tokens_json(&ids, req.with_pieces.then_some(tok))
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}

/// `{"tokens": [...]}`, ids or `{"id", "piece"}` objects, written straight into the answer's
/// bytes (a JSON tree of a long text's pieces would be many times its size).
fn tokens_json(ids: &[u32], pieces: Option<&tessera_tokenizer::Tokenizer>) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Piece<'a> {
        id: u32,
        piece: &'a str,
    }
    let mut out = Vec::with_capacity(16 + ids.len() * if pieces.is_some() { 28 } else { 7 });
    out.extend_from_slice(b"{\"tokens\":[");
    for (i, &id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match pieces {
            Some(tok) => {
                let bytes = tok.token_to_piece(id, true);
                let piece = String::from_utf8_lossy(&bytes);
                let _ = serde_json::to_writer(&mut out, &Piece { id, piece: &piece });
            }
            None => out.extend_from_slice(id.to_string().as_bytes()),
        }
    }
    out.extend_from_slice(b"]}");
    out
}

pub async fn detokenize(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    answer(detokenize_body(app, headers, body).await)
}

async fn detokenize_body(
    app: Arc<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_body(&app, &headers, body).await?;
    let req: DetokenizeRequest = cpu(&app, move || request::parse(&bytes)).await??;
    // Pieces are a few bytes each: as many tokens as /tokenize returns for its largest content.
    let most = app.settings.tokenize_limit / 4;
    if req.tokens.len() > most {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!(
                "'tokens' has {} ids; /detokenize takes at most {most}",
                req.tokens.len()
            ),
        ));
    }
    let loaded = app.registry.get(req.model.as_deref()).await?;
    let n_vocab = loaded.model.n_vocab();
    if let Some(&id) = req.tokens.iter().find(|&&id| id as usize >= n_vocab) {
        return Err(ApiError::invalid(format!(
            "token {id} is not below the vocabulary size {n_vocab}"
        )));
    }
    let content = cpu(&app, move || {
        loaded.model.tokenizer().decode(&req.tokens, true)
    })
    .await?;
    Ok(Json(json!({"content": content})).into_response())
}

pub async fn not_found(uri: Uri) -> Response {
    ApiError::not_found(format!("no endpoint {}", uri.path())).into_response()
}

/// A fresh number (response ids; seeds of requests that give none, mixed with the time).
pub fn next_number(app: &App) -> u64 {
    app.counter.fetch_add(1, Ordering::Relaxed)
}
