//! A bearer token off loopback: refused to start without one, 401 without it, 200 with it.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, finished};
use sonde_http::{access_for, Access, AccessError};

#[test]
fn a_public_address_needs_a_token() {
    let public = "0.0.0.0:8080".parse().unwrap();
    assert_eq!(access_for(public, None), Err(AccessError::TokenRequired(public)));
    assert_eq!(access_for("127.0.0.1:0".parse().unwrap(), None), Ok(Access::Open));
}

#[tokio::test]
async fn without_the_token_401_with_it_200() {
    let access = Access::Token("s3cret".into());
    let send = |uri: &str, auth: Option<&str>| {
        let mut req = Request::get(uri);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        call(finished(), access.clone(), req.body(Body::empty()).unwrap())
    };
    for uri in ["/api/status", "/metrics", "/api/flows"] {
        let (code, body) = send(uri, None).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "{uri}");
        assert!(String::from_utf8(body).unwrap().contains("unauthorized"));
        assert_eq!(send(uri, Some("Bearer wrong")).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(send(uri, Some("Basic s3cret")).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(send(uri, Some("Bearer s3cret")).await.0, StatusCode::OK, "{uri}");
    }
    // EventSource cannot set a header: the token may come as a query parameter.
    assert_eq!(send("/api/status?token=s3cret", None).await.0, StatusCode::OK);
    assert_eq!(send("/api/status?token=s3cre", None).await.0, StatusCode::UNAUTHORIZED);
    // The dashboard's files hold no data and stay open (the page sends the token itself).
    assert_eq!(send("/", None).await.0, StatusCode::OK);
}
