//! Errors as the OpenAI API returns them: an HTTP status and
//! `{"error": {"message", "type", "code"}}` (llama-server's shape).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's error `type` (`invalid_request_error`, `authentication_error`, ...).
    pub kind: &'static str,
    /// Seconds to send as `Retry-After` (a 503 that will pass).
    pub retry_after: Option<u32>,
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

    /// The same error with a `Retry-After` of `seconds`.
    pub fn retry_after(mut self, seconds: u32) -> ApiError {
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
        if let Some(s) = self.retry_after {
            res.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.into());
        }
        res
    }
}
