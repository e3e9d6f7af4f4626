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

/// Marks an answer to a request that passed [`require`]: its connection is trusted (kept when
/// the server is at its connection cap).
#[derive(Debug, Clone, Copy)]
pub struct Passed;

async fn pass(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    res.extensions_mut().insert(Passed);
    res
}

/// Middleware: 401 with `WWW-Authenticate: Bearer` unless the request holds the token.
pub async fn require(State(access): State<Access>, req: Request, next: Next) -> Response {
    match &access {
        Access::Open => pass(req, next).await,
        Access::Token(t) if presented(&req).is_some_and(|p| same(p.as_bytes(), t.as_bytes())) => pass(req, next).await,
        Access::Token(_) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(serde_json::json!({"error": "unauthorized", "message": "a bearer token is required"})),
        )
            .into_response(),
    }
}

/// Whether `authority` (a `Host` value: a name or address, with or without a port) names this
/// machine's loopback: `localhost`, 127.0.0.0/8 or `[::1]`. A tokenless server answers only
/// these, so that a web page whose name was rebound to 127.0.0.1 (DNS rebinding) cannot read it.
pub fn loopback_host(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        // [::1] or [::1]:port
        Some(rest) => match rest.split_once(']') {
            Some((inside, port)) if port.is_empty() || valid_port(port) => inside,
            _ => return false,
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) if valid_port(&format!(":{port}")) => host,
            Some(_) => return false,
            None => authority,
        },
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn valid_port(port: &str) -> bool {
    port.strip_prefix(':').is_some_and(|p| p.parse::<u16>().is_ok())
}

/// Middleware of every server: 400 for a request with more than one `Host` (RFC 9112 §3.2:
/// a server must refuse it), whose checks would otherwise pass on the first while a proxy in
/// front may have routed by another.
pub async fn one_host(req: Request, next: Next) -> Response {
    match req.headers().get_all(header::HOST).iter().count() {
        0 | 1 => next.run(req).await,
        n => (
            StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({
                "error": "bad_host",
                "message": format!("a request carries one Host header (RFC 9112 section 3.2); this one has {n}"),
            })),
        )
            .into_response(),
    }
}

/// Middleware of a tokenless server: 421 unless `Host` names loopback. A request without a
/// `Host` (HTTP/1.0) is answered: a browser always sends one.
pub async fn loopback_only(req: Request, next: Next) -> Response {
    let authority = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| req.headers().get(header::HOST).map(|h| h.to_str().unwrap_or("\u{fffd}").to_string()));
    match authority {
        Some(a) if !loopback_host(&a) => (
            StatusCode::MISDIRECTED_REQUEST,
            axum::Json(serde_json::json!({
                "error": "bad_host",
                "message": "without a token this server answers only Host: localhost, 127.0.0.1 or [::1] \
                            (with a port); give it a token (--http-token) to be reached by another name",
            })),
        )
            .into_response(),
        _ => next.run(req).await,
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
    fn loopback_names_only() {
        for ok in ["localhost", "LOCALHOST:8080", "localhost.", "127.0.0.1", "127.1.2.3:80", "[::1]", "[::1]:8080"] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1",
            "0.0.0.0:80",
            "[::2]:80",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "localhost:http",
            "[::1]x",
            "",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
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
