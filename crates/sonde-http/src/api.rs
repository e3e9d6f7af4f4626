//! The router: JSON API under `/api`, `/metrics`, and the dashboard's embedded files. Every
//! handler reads the latest snapshot; none takes a lock the engine holds.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Extension, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::auth::{self, Access};
use crate::flows::{self, FlowQuery};
use crate::server::Limits;
use crate::snapshot::{Phase, Table};
use crate::state::{ChangeRefused, DefinitionChange, RunState};
use crate::{dashboard, metrics, store, stream};

type Shared = Arc<RunState>;

/// The router's share of [`Limits`]: what handlers count against.
pub(crate) struct Guards {
    pub(crate) limits: Limits,
    /// One permit per `/api/stream` client.
    pub(crate) streams: Arc<Semaphore>,
    flow_queries: Arc<Semaphore>,
    /// The API's definition changes, one at a time, and those the snapshot does not show yet
    /// (the set's version after each, and +1 for an addition, -1 for a removal).
    changes: tokio::sync::Mutex<Vec<(u64, i64)>>,
}

type Guarded = Extension<Arc<Guards>>;

/// A query string, refused as `bad_query` (400) with serde's reason when it does not parse.
pub(crate) struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Response;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(q)) => Ok(Query(q)),
            Err(e) => Err(query_refused(&e)),
        }
    }
}

fn query_refused(e: &QueryRejection) -> Response {
    error(StatusCode::BAD_REQUEST, "bad_query", e.body_text())
}

/// A path parameter, refused as `bad_path` (400) when it does not decode.
pub(crate) struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Response;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(p)) => Ok(Path(p)),
            Err(e) => Err(error(e.status(), "bad_path", e.body_text())),
        }
    }
}

/// A JSON body, refused with a 4xx and the reason when it is not one: 400 `bad_json` (not
/// JSON), 415 `bad_json` (no `Content-Type: application/json`), 422 `bad_json` (JSON of another
/// shape), 413 `too_large` (beyond the body limit).
pub(crate) struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Response;
    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(b)) => Ok(Body(b)),
            Err(e) => Err(json_refused(&e)),
        }
    }
}

fn json_refused(e: &JsonRejection) -> Response {
    match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => error(StatusCode::PAYLOAD_TOO_LARGE, "too_large", e.body_text()),
        s if s.is_client_error() => error(s, "bad_json", e.body_text()),
        _ => error(StatusCode::BAD_REQUEST, "bad_json", e.body_text()),
    }
}

/// An error answer: `{"error": CODE, "message": TEXT}`.
fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": code, "message": message.into()}))).into_response()
}

/// Every route of the API and `/metrics`, as (path, handlers): the router is built from this
/// list, and the OpenAPI test checks it against docs/openapi.json.
pub fn api_routes() -> Vec<(&'static str, MethodRouter<Shared>)> {
    vec![
        ("/api/status", get(status)),
        ("/api/summary", get(summary)),
        ("/api/intervals", get(intervals)),
        ("/api/intervals/current", get(current_interval)),
        ("/api/histograms", get(histograms)),
        ("/api/tables", get(table_list)),
        ("/api/tables/{name}", get(table)),
        ("/api/flows", get(flow_page)),
        ("/api/definitions", get(definitions).post(add_definition)),
        ("/api/definitions/counts", get(definition_counts)),
        ("/api/definitions/{name}", axum::routing::put(replace_definition).delete(remove_definition)),
        ("/api/live", get(live_series)),
        ("/api/store", get(store_listing)),
        ("/api/store/series", get(store_series)),
        ("/api/stream", get(events)),
        ("/api/probes", get(probes)),
        ("/metrics", get(prometheus)),
    ]
}

/// The routes a merged view (`sonde serve --merged`) answers 501 `not_in_merged_view`, by the
/// first part of their path (each path and those under it): the merge job keeps no single flow,
/// definition, live bin, store or run summary, only intervals, quantiles, histograms, probes and
/// the flows' hosts and host pairs (served as `/api/tables` and `/api/flows`; docs/merged.md).
pub const NOT_IN_MERGED_VIEW: [&str; 4] = ["/api/summary", "/api/definitions", "/api/live", "/api/store"];

/// Whether `path` is one of [`NOT_IN_MERGED_VIEW`]'s routes.
fn not_in_merged_view(path: &str) -> bool {
    NOT_IN_MERGED_VIEW.iter().any(|p| path.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

/// Answers 501 on a merged view for the routes it has nothing for (a route layer: only paths
/// that name a route get here).
async fn merged_view_guard(State(s): State<Shared>, req: Request, next: axum::middleware::Next) -> Response {
    let refused = not_in_merged_view(req.uri().path());
    if refused && s.snapshot().status.merged.is_some() {
        return error(
            StatusCode::NOT_IMPLEMENTED,
            "not_in_merged_view",
            "a merged view of several probes has intervals, quantiles, histograms, probes and the \
             flows' hosts and host pairs only: ask a probe's own server (sonde monitor --http) for its \
             definitions, live bins, store and summary",
        );
    }
    next.run(req).await
}

/// The whole application with the default [`Limits`].
pub fn router(state: Shared, access: Access) -> Router {
    router_with(state, access, &Limits::default())
}

/// The whole application: the API and metrics behind `access`, the dashboard's files open
/// (they hold no data; the page sends the token with each call). Without a token, only a `Host`
/// naming loopback is answered (421 otherwise). Every answer carries the security headers
/// ([`SECURITY_HEADERS`]); bodies are bounded by `limits.max_body_bytes` (413).
pub fn router_with(state: Shared, access: Access, limits: &Limits) -> Router {
    let guards = Arc::new(Guards {
        limits: limits.clone(),
        streams: Arc::new(Semaphore::new(limits.max_streams)),
        flow_queries: Arc::new(Semaphore::new(limits.max_flow_queries.max(1))),
        changes: Default::default(),
    });
    let mut api = Router::new();
    for (path, handlers) in api_routes() {
        api = api.route(path, handlers);
    }
    let open = access == Access::Open;
    let api = api
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), merged_view_guard))
        .layer(axum::middleware::from_fn_with_state(access, auth::require))
        .with_state(state);
    let mut app = dashboard::routes()
        .merge(api)
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such path") })
        .layer(Extension(guards))
        .layer(DefaultBodyLimit::max(limits.max_body_bytes));
    if open {
        app = app.layer(axum::middleware::from_fn(auth::loopback_only));
    }
    app.layer(axum::middleware::from_fn(auth::one_host)).layer(axum::middleware::map_response(secured))
}

/// Headers on every answer: the dashboard loads only its own files and calls only its own
/// server (no inline script or style, no framing by another site), and no answer is sniffed into
/// another type or leaks its address in a `Referer`.
pub const SECURITY_HEADERS: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
         object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-resource-policy", "same-origin"),
];

async fn secured(mut res: Response) -> Response {
    let headers = res.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    res
}

async fn status(State(s): State<Shared>) -> Response {
    let status = s.snapshot().status.clone();
    match s.control() {
        Some(control) => {
            let mut value = serde_json::to_value(status).unwrap_or_default();
            if let Some(object) = value.as_object_mut() {
                object.insert("control".into(), control);
            }
            Json(value).into_response()
        }
        None => Json(status).into_response(),
    }
}

#[derive(Debug, Deserialize)]
struct After {
    /// Bins starting after this packet time (Unix seconds).
    after: Option<f64>,
}

async fn live_series(State(s): State<Shared>, Query(q): Query<After>) -> Response {
    let snap = s.snapshot();
    let after = q.after.unwrap_or(f64::NEG_INFINITY);
    let bins: Vec<_> = snap.live.bins.iter().filter(|b| b.start_s > after).collect();
    Json(json!({"bin_s": snap.live.bin_s, "bins": bins})).into_response()
}

async fn summary(State(s): State<Shared>) -> Response {
    Json(s.snapshot().summary.clone()).into_response()
}

#[derive(Debug, Deserialize)]
struct Since {
    /// Intervals starting at or after this packet time (Unix seconds).
    since: Option<f64>,
    metric: Option<String>,
}

async fn intervals(State(s): State<Shared>, Query(q): Query<Since>) -> Response {
    let snap = s.snapshot();
    let since = q.since.unwrap_or(f64::NEG_INFINITY);
    let items: Vec<_> = snap.intervals.items.iter().filter(|i| i.start_s >= since).collect();
    Json(json!({"interval_s": snap.intervals.interval_s, "items": items})).into_response()
}

async fn current_interval(State(s): State<Shared>) -> Response {
    let snap = s.snapshot();
    match snap.intervals.items.last() {
        Some(i) => Json(i).into_response(),
        None => {
            error(StatusCode::NOT_FOUND, "no_interval", "the run has no interval (monitoring off, or no packet yet)")
        }
    }
}

async fn histograms(State(s): State<Shared>, Query(q): Query<Since>) -> Response {
    let snap = s.snapshot();
    let since = q.since.unwrap_or(f64::NEG_INFINITY);
    let items: Vec<Value> = snap
        .intervals
        .histograms
        .iter()
        .filter(|h| h.start_s >= since)
        .map(|h| {
            let rows: Vec<_> =
                h.histograms.iter().filter(|r| q.metric.as_deref().is_none_or(|m| m == r.metric)).collect();
            json!({"index": h.index, "start_s": h.start_s, "histograms": rows})
        })
        .collect();
    Json(json!({"items": items})).into_response()
}

const TABLES: [&str; 4] = ["hosts", "matrix", "protocols", "top"];

fn table_named<'a>(t: &'a crate::snapshot::TableFiles, name: &str) -> Option<&'a Table> {
    match name {
        "hosts" => Some(&t.hosts),
        "matrix" => Some(&t.matrix),
        "protocols" => Some(&t.protocols),
        "top" => Some(&t.top),
        _ => None,
    }
}

async fn table_list(State(s): State<Shared>) -> Response {
    let snap = s.snapshot();
    let items: Vec<Value> = TABLES
        .iter()
        .filter_map(|n| table_named(&snap.tables, n).map(|t| json!({"name": n, "rows": t.len()})))
        .collect();
    Json(json!({"items": items})).into_response()
}

async fn table(State(s): State<Shared>, Path(name): Path<String>, Query(q): Query<Since>) -> Response {
    let snap = s.snapshot();
    let Some(t) = table_named(&snap.tables, &name) else {
        return error(StatusCode::NOT_FOUND, "no_table", format!("tables are {}", TABLES.join(", ")));
    };
    Json(since_rows(t, q.since)).into_response()
}

/// The rows whose `start` column is at or after `since`.
fn since_rows(t: &Table, since: Option<f64>) -> Table {
    let (Some(since), Some(start)) = (since, t.column("start")) else { return t.clone() };
    t.filtered(|t, i| t.cell(i, start).as_f64().is_some_and(|v| v >= since))
}

/// A query reads and sorts a whole flow log (seconds for millions of lines): it runs on the
/// blocking pool, `max_flow_queries` at once, so the async workers keep answering.
async fn flow_page(State(s): State<Shared>, Extension(g): Guarded, Query(q): Query<FlowQuery>) -> Response {
    let Ok(permit) = g.flow_queries.clone().acquire_owned().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the server is stopping");
    };
    let snap = s.snapshot();
    let answer = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let page = if snap.status.merged.is_some() {
            flows::pairs(&snap.tables.matrix, &q)
        } else {
            flows::query(&snap.flows.tcp, &snap.flows.udp, &q)
        };
        page.map(|page| Json(page).into_response())
    })
    .await;
    match answer {
        Ok(Ok(res)) => res,
        Ok(Err(e)) => error(StatusCode::BAD_REQUEST, "bad_query", e.0),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the query failed"),
    }
}

async fn definitions(State(s): State<Shared>) -> Response {
    let snap = s.snapshot();
    let d = &snap.definitions;
    let body = json!({"version": d.version, "editable": s.editor().is_some(), "items": d.items, "associations": d.associations});
    Json(body).into_response()
}

#[derive(Debug, Deserialize)]
struct NameQuery {
    name: Option<String>,
    since: Option<f64>,
}

async fn definition_counts(State(s): State<Shared>, Query(q): Query<NameQuery>) -> Response {
    let snap = s.snapshot();
    let t = since_rows(&snap.definitions.counts, q.since);
    let Some(name) = q.name else { return Json(t).into_response() };
    let col = t.column("definition");
    Json(t.filtered(|t, i| col.is_some_and(|c| t.cell(i, c).as_str() == Some(&name)))).into_response()
}

/// A change's body: the set's version it was made against and the definition line.
#[derive(Debug, Deserialize)]
struct ChangeBody {
    version: u64,
    definition: String,
}

#[derive(Debug, Deserialize)]
struct VersionQuery {
    version: u64,
}

/// Hands the change to a live run's engine, which checks the version against the set as it is
/// (the snapshot may be a moment behind). Without one (a finished run) a stale version is
/// reported as such first, then that nothing is counting. An addition beyond
/// `max_definitions` is refused (409 `too_many_definitions`).
async fn change(s: Shared, g: &Guards, version: u64, change: DefinitionChange) -> Response {
    let snap = s.snapshot();
    if s.editor().is_none() || snap.status.state != Phase::Running {
        if version != snap.definitions.version {
            return stale(snap.definitions.version, version);
        }
        return error(
            StatusCode::CONFLICT,
            "run_finished",
            "the run is finished: nothing is counting, so definitions cannot change (they can on a live monitor)",
        );
    }
    // One change at a time, so the count below holds until the engine has answered.
    let mut pending = g.changes.lock().await;
    let snap = s.snapshot();
    let seen = snap.definitions.version;
    pending.retain(|&(v, _)| v > seen);
    let d = &snap.definitions;
    let active = d.items.iter().filter(|i| !i.retired).count() as i64
        + d.associations.len() as i64
        + pending.iter().map(|&(_, delta)| delta).sum::<i64>();
    let delta = match &change {
        DefinitionChange::Add(_) => 1,
        DefinitionChange::Replace(_) => 0,
        DefinitionChange::Remove(_) => -1,
    };
    if delta > 0 && active >= g.limits.max_definitions as i64 {
        return error(
            StatusCode::CONFLICT,
            "too_many_definitions",
            format!(
                "the run counts {active} definitions, its limit (--http-max-definitions {}): remove one first",
                g.limits.max_definitions
            ),
        );
    }
    // The engine answers at its next drain: a blocking wait, off the async workers.
    let engine = s.clone();
    let answer = tokio::task::spawn_blocking(move || match engine.editor() {
        Some(e) => e.apply(version, change),
        None => Err(ChangeRefused::Finished),
    })
    .await
    .unwrap_or(Err(ChangeRefused::Finished));
    match answer {
        Ok(v) => {
            pending.push((v, delta));
            Json(json!({"version": v})).into_response()
        }
        Err(ChangeRefused::StaleVersion { current }) => stale(current, version),
        Err(ChangeRefused::Invalid(m)) => error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_definition", m),
        Err(ChangeRefused::Busy(m)) => error(StatusCode::SERVICE_UNAVAILABLE, "busy", m),
        Err(ChangeRefused::Finished) => error(
            StatusCode::CONFLICT,
            "run_finished",
            "the run finished before the change reached it: nothing is counting any more",
        ),
    }
}

fn stale(current: u64, given: u64) -> Response {
    let body = json!({"error": "stale_version", "message": format!("the set is at version {current}, not {given}"), "version": current});
    (StatusCode::CONFLICT, Json(body)).into_response()
}

async fn add_definition(State(s): State<Shared>, Extension(g): Guarded, Body(b): Body<ChangeBody>) -> Response {
    change(s, &g, b.version, DefinitionChange::Add(b.definition)).await
}

async fn replace_definition(
    State(s): State<Shared>,
    Extension(g): Guarded,
    Path(name): Path<String>,
    Body(b): Body<ChangeBody>,
) -> Response {
    // The line names its definition; the path must agree, or the client replaces another one.
    let named = b.definition.split(|c: char| c.is_whitespace() || c == ':' || c == '=').next().unwrap_or("");
    if named != name {
        return error(
            StatusCode::BAD_REQUEST,
            "name_mismatch",
            format!("the line defines {named:?}, the path {name:?}"),
        );
    }
    change(s, &g, b.version, DefinitionChange::Replace(b.definition)).await
}

async fn remove_definition(
    State(s): State<Shared>,
    Extension(g): Guarded,
    Path(name): Path<String>,
    Query(q): Query<VersionQuery>,
) -> Response {
    change(s, &g, q.version, DefinitionChange::Remove(name)).await
}

#[derive(Debug, Deserialize)]
struct StreamQuery {
    resolution_ms: Option<u64>,
}

async fn events(State(s): State<Shared>, Extension(g): Guarded, Query(q): Query<StreamQuery>) -> Response {
    let ms = q.resolution_ms.unwrap_or(1000);
    if ms < stream::MIN_RESOLUTION_MS {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_query",
            format!("resolution_ms is at least {}", stream::MIN_RESOLUTION_MS),
        );
    }
    // One permit per client, held by its stream until it leaves.
    let Ok(permit) = g.streams.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!("{} stream clients already (--http-max-streams)", g.limits.max_streams),
        );
    };
    let keep_alive = (g.limits.idle_timeout / 2).min(stream::KEEP_ALIVE);
    stream::events(&s, ms, permit, keep_alive).into_response()
}

/// The store's answer, read off the async workers (a file read), counted.
async fn store_answer<T: serde::Serialize + Send + 'static>(
    s: Shared,
    read: impl FnOnce(&std::path::Path) -> Result<T, store::Refused> + Send + 'static,
) -> Response {
    let Some(path) = s.store().map(std::path::Path::to_path_buf) else {
        let refused: Result<T, _> = Err(store::Refused(404, "no_store", String::new()));
        s.store_counters.count(&refused);
        return error(
            StatusCode::NOT_FOUND,
            "no_store",
            "this run keeps no long-term store (analyze or monitor with --store FILE)",
        );
    };
    let answer = tokio::task::spawn_blocking(move || {
        let result = read(&path);
        s.store_counters.count(&result);
        result
    })
    .await;
    match answer {
        Ok(Ok(body)) => Json(body).into_response(),
        Ok(Err(store::Refused(code, name, message))) => {
            error(StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST), name, message)
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the store query failed"),
    }
}

async fn store_listing(State(s): State<Shared>, Extension(g): Guarded) -> Response {
    let max = g.limits.max_store_points;
    store_answer(s, move |path| store::listing(path, max)).await
}

async fn store_series(State(s): State<Shared>, Extension(g): Guarded, Query(q): Query<store::SeriesQuery>) -> Response {
    let max = g.limits.max_store_points;
    store_answer(s, move |path| store::series(path, &q, max)).await
}

/// A merged view's probes (empty for one run's server): `{"merged": bool, "items": [...]}`.
async fn probes(State(s): State<Shared>) -> Response {
    let snap = s.snapshot();
    Json(json!({"merged": snap.status.merged.is_some(), "items": snap.probes})).into_response()
}

async fn prometheus(State(s): State<Shared>) -> Response {
    let mut text = metrics::render(&s.snapshot(), &s.export_counters());
    if let Some(version) = s.control().and_then(|c| c["version"].as_u64()) {
        use std::fmt::Write;
        let _ = write!(
            text,
            "# HELP sonde_control_version The control topic's version of the definitions this probe applies.\n\
             # TYPE sonde_control_version gauge\nsonde_control_version {version}\n"
        );
    }
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}
