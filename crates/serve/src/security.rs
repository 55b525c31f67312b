//! A page on the same machine is a hostile client until allowed (the remoting rules): every
//! request passes here before any handler.
//!
//! - The `Host` header must name this machine: an IP address, `localhost` (or a name under
//!   `.localhost`), or an `--allowed-host` entry; anything else is 403. A page that rebinds
//!   its own domain name to 127.0.0.1 (DNS rebinding) sends its own name, and is refused even
//!   without an `Origin`.
//! - A request with an `Origin` header (a browser page) gets 403 unless the origin is on the
//!   allowlist (`--allowed-origin`), whatever key it carries: the key is not a page's to use.
//! - A CORS preflight (`OPTIONS`) is answered only for allowed origins, allowing the
//!   `Authorization` and `Content-Type` headers and private-network access (Chrome asks before
//!   a public page may reach a loopback address).
//! - With an API key, every endpoint but `/health` and `/v1/health` needs
//!   `Authorization: Bearer KEY`, compared in constant time.
//! - A declared body over the limit is a 413 at once (the handlers' own limit catches bodies
//!   that lie about their length or have none declared).

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
    /// Host names (without port) requests may address besides IP addresses and `localhost`.
    pub allowed_hosts: Vec<String>,
}

/// The guard's state: who may call, and the body limit (a `Content-Length` above it is refused
/// before anything waits for the body).
pub struct Guard {
    pub access: Access,
    pub body_limit: usize,
}

impl Access {
    /// Whether a `Host` header value names this machine (any port).
    pub fn host_allowed(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            // `[v6]` or `[v6]:port`
            Some(rest) => match rest.split_once(']') {
                Some((v6, rest))
                    if rest.is_empty() || rest.strip_prefix(':').is_some_and(valid_port) =>
                {
                    return v6.parse::<std::net::Ipv6Addr>().is_ok()
                }
                _ => return false,
            },
            None => match host.rsplit_once(':') {
                Some((name, port)) if valid_port(port) => name,
                Some(_) => return false,
                None => host,
            },
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        name.parse::<std::net::Ipv4Addr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.trim_end_matches('.').eq_ignore_ascii_case(&name))
    }

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
pub async fn guard(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let access = &guard.access;
    let host = req.headers().get(header::HOST).map(|h| h.to_str());
    match host {
        Some(Ok(h)) if access.host_allowed(h) => {}
        Some(Ok(h)) => return ApiError::forbidden_host(h).into_response(),
        _ => return ApiError::forbidden_host("(none)").into_response(),
    }
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
    let open = matches!(req.uri().path(), "/health" | "/v1/health");
    let refusal = if !open && !access.key_matches(req.headers()) {
        Some(ApiError::unauthorized())
    } else {
        declared_length(req.headers())
            .filter(|&n| n > guard.body_limit as u64)
            .map(|n| {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_request_error",
                    format!(
                        "the body of {n} bytes is over the limit of {}",
                        guard.body_limit
                    ),
                )
            })
    };
    if let Some(e) = refusal {
        let mut res = e.into_response();
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

fn valid_port(port: &str) -> bool {
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

/// The `Content-Length` a request declares (`u64::MAX` when it is not a number).
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).map(|v| {
        v.to_str()
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(u64::MAX)
    })
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
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    res
}
