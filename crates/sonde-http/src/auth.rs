//! Who may read: anyone on a loopback address, a bearer token's holder otherwise.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What a request needs to be answered.
#[derive(Clone, PartialEq, Eq)]
pub enum Access {
    Open,
    /// `Authorization: Bearer TOKEN` (or `?token=TOKEN`, for EventSource, which cannot set
    /// headers).
    Token(String),
}

impl std::fmt::Debug for Access {
    // The token itself never goes into a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Open => f.write_str("Open"),
            Access::Token(_) => f.write_str("Token(..)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessError {
    /// Bound to a non-loopback address without a token.
    TokenRequired(SocketAddr),
    EmptyToken,
}

impl std::fmt::Display for AccessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessError::TokenRequired(a) => write!(
                f,
                "{a} is not a loopback address: a bearer token is required (--http-token FILE or SONDE_HTTP_TOKEN)"
            ),
            AccessError::EmptyToken => f.write_str("the HTTP token is empty"),
        }
    }
}

impl std::error::Error for AccessError {}

/// The access for a server bound to `addr`: a token is required off loopback; on loopback one
/// given is still enforced.
pub fn access_for(addr: SocketAddr, token: Option<&str>) -> Result<Access, AccessError> {
    match token.map(str::trim) {
        Some("") => Err(AccessError::EmptyToken),
        Some(t) => Ok(Access::Token(t.to_string())),
        None if addr.ip().is_loopback() => Ok(Access::Open),
        None => Err(AccessError::TokenRequired(addr)),
    }
}

/// Equal without stopping at the first difference (no timing hint of the prefix matched).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn presented(req: &Request) -> Option<String> {
    if let Some(v) = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        return bearer(v);
    }
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix("token=")).map(str::to_string)
}

/// The token of an `Authorization` value: the scheme is case-insensitive (RFC 7235 §2.1), so
/// `bearer` and `BEARER` are `Bearer`.
fn bearer(value: &str) -> Option<String> {
    let (scheme, token) = value.trim().split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_string())
}

/// Middleware: 401 with `WWW-Authenticate: Bearer` unless the request holds the token.
pub async fn require(State(access): State<Access>, req: Request, next: Next) -> Response {
    match &access {
        Access::Open => next.run(req).await,
        Access::Token(t) if presented(&req).is_some_and(|p| same(p.as_bytes(), t.as_bytes())) => next.run(req).await,
        Access::Token(_) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(serde_json::json!({"error": "unauthorized", "message": "a bearer token is required"})),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_needed_off_loopback_only() {
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let lo6: SocketAddr = "[::1]:8080".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(access_for(lo, None), Ok(Access::Open));
        assert_eq!(access_for(lo6, None), Ok(Access::Open));
        assert_eq!(access_for(any, None), Err(AccessError::TokenRequired(any)));
        assert_eq!(access_for(any, Some(" s3cret\n")), Ok(Access::Token("s3cret".into())));
        assert_eq!(access_for(any, Some("  ")), Err(AccessError::EmptyToken));
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"ab"));
    }

    #[test]
    fn the_scheme_is_case_insensitive() {
        for value in ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret ", "beaRer\ts3cret"] {
            assert_eq!(bearer(value).as_deref(), Some("s3cret"), "{value:?}");
        }
        for value in ["Basic s3cret", "Bearers3cret", "s3cret", ""] {
            assert_eq!(bearer(value), None, "{value:?}");
        }
    }
}
