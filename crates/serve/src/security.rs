//! A page on the same machine is a hostile client until allowed (the remoting rules): every
//! request passes here before any handler.
//!
//! - A request with an `Origin` header (a browser page) gets 403 unless the origin is on the
//!   allowlist (`--allowed-origin`), whatever key it carries: the key is not a page's to use.
//! - A CORS preflight (`OPTIONS`) is answered only for allowed origins, allowing the
//!   `Authorization` and `Content-Type` headers and private-network access (Chrome asks before
//!   a public page may reach a loopback address).
//! - With an API key, every endpoint but `/health` needs `Authorization: Bearer KEY`, compared
//!   in constant time.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// Who may call the server.
#[derive(Clone, Debug, Default)]
pub struct Access {
    pub api_key: Option<String>,
    /// Exact origins (`scheme://host[:port]`) whose pages may call the server.
    pub allowed_origins: Vec<String>,
}

impl Access {
    fn origin_allowed(&self, origin: &str) -> bool {
        self.allowed_origins.iter().any(|o| o == origin)
    }

    fn key_matches(&self, headers: &HeaderMap) -> bool {
        let Some(key) = &self.api_key else {
            return true;
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        // Constant time over the key's bytes (lengths are compared first by `ct_eq`, which
        // reveals only whether they differ).
        bool::from(given.as_bytes().ct_eq(key.as_bytes()))
    }
}

/// The middleware (`axum::middleware::from_fn_with_state`).
pub async fn guard(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    let origin = match req.headers().get(header::ORIGIN) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(o) if access.origin_allowed(o) => Some(v.clone()),
            Ok(o) => return ApiError::forbidden_origin(o).into_response(),
            Err(_) => return ApiError::forbidden_origin("(not text)").into_response(),
        },
    };
    if req.method() == Method::OPTIONS {
        return match origin {
            Some(origin) => preflight(origin),
            None => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "OPTIONS is only answered to a CORS preflight",
            )
            .into_response(),
        };
    }
    if req.uri().path() != "/health" && !access.key_matches(req.headers()) {
        let mut res = ApiError::unauthorized().into_response();
        if let Some(o) = origin {
            allow_origin(&mut res, o);
        }
        return res;
    }
    let mut res = next.run(req).await;
    if let Some(o) = origin {
        allow_origin(&mut res, o);
    }
    res
}

fn allow_origin(res: &mut Response, origin: HeaderValue) {
    let h = res.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
}

fn preflight(origin: HeaderValue) -> Response {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::NO_CONTENT;
    allow_origin(&mut res, origin);
    let h = res.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Authorization, Content-Type"),
    );
    h.insert(
        "access-control-allow-private-network",
        HeaderValue::from_static("true"),
    );
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    res
}
