//! Errors as the OpenAI API returns them: an HTTP status and
//! `{"error": {"message", "type", "code"}}` (llama-server's shape).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's error `type` (`invalid_request_error`, `authentication_error`, ...).
    pub kind: &'static str,
    /// Seconds after which a retry may succeed (a 503's `Retry-After` header).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            retry_after: None,
        }
    }

    /// The same error, telling the client to retry after `seconds` (`Retry-After`).
    pub fn with_retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// 400: a malformed or out-of-range request.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400: a prompt that does not fit the slot's context (llama-server's type).
    pub fn exceeds_context(n_prompt: usize, n_ctx: usize) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "exceed_context_size_error",
            format!("the request has {n_prompt} prompt tokens but the context holds {n_ctx}"),
        )
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid or missing API key",
        )
    }

    pub fn forbidden_origin(origin: &str) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            format!("origin {origin:?} is not allowed (start the server with --allowed-origin)"),
        )
    }

    pub fn forbidden_host(host: &str) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            format!("host {host:?} is not this server's (start the server with --allowed-host)"),
        )
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found_error", message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable_error",
            message,
        )
    }

    /// 503: a model whose last load failed, within its back-off. The reason is the server
    /// log's: it may name files or carry the host's messages, which are not a client's to see.
    pub fn model_failed(name: &str, retry_after: u64) -> ApiError {
        ApiError::unavailable(format!("model {name:?} failed to load; see the server log"))
            .with_retry_after(retry_after)
    }

    /// 503: loading `name` needs room under the loaded-model cap and every loaded model is
    /// serving requests.
    pub fn models_busy(name: &str, models_max: usize) -> ApiError {
        ApiError::unavailable(format!(
            "model {name:?} cannot be loaded now: {models_max} models are loaded (the \
             --models-max cap) and all are serving requests; try again later"
        ))
        .with_retry_after(1)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// The JSON body (also sent as the last event of a failing stream).
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "code": self.status.as_u16(),
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        res
    }
}
