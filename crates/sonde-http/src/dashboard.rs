//! The dashboard: three files embedded in the binary (no CDN, no build step), plain JS drawing
//! SVG from the API.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");

/// The dashboard's paths, for the OpenAPI test.
pub const PATHS: [&str; 3] = ["/", "/assets/app.js", "/assets/style.css"];

fn file(content_type: &'static str, body: &'static str) -> impl IntoResponse + Clone {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body)
}

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(PATHS[0], get(|| async { file("text/html; charset=utf-8", INDEX_HTML) }))
        .route(PATHS[1], get(|| async { file("text/javascript; charset=utf-8", APP_JS) }))
        .route(PATHS[2], get(|| async { file("text/css; charset=utf-8", STYLE_CSS) }))
}
