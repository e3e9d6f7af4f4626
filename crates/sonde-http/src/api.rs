//! The router: JSON API under `/api`, `/metrics`, and the dashboard's embedded files. Every
//! handler reads the latest snapshot; none takes a lock the engine holds.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::auth::{self, Access};
use crate::flows::{self, FlowQuery};
use crate::snapshot::{Phase, Table};
use crate::state::{ChangeRefused, DefinitionChange, RunState};
use crate::{dashboard, metrics, stream};

type Shared = Arc<RunState>;

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
        ("/api/stream", get(events)),
        ("/metrics", get(prometheus)),
    ]
}

/// The whole application: the API and metrics behind `access`, the dashboard's files open
/// (they hold no data; the page sends the token with each call).
pub fn router(state: Shared, access: Access) -> Router {
    let mut api = Router::new();
    for (path, handlers) in api_routes() {
        api = api.route(path, handlers);
    }
    let api = api.layer(axum::middleware::from_fn_with_state(access, auth::require)).with_state(state);
    dashboard::routes().merge(api).fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such path") })
}

async fn status(State(s): State<Shared>) -> Response {
    Json(s.snapshot().status.clone()).into_response()
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

async fn flow_page(State(s): State<Shared>, Query(q): Query<FlowQuery>) -> Response {
    let snap = s.snapshot();
    match flows::query(&snap.flows.tcp, &snap.flows.udp, &q) {
        Ok(page) => Json(page).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, "bad_query", e.0),
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
/// reported as such first, then that nothing is counting.
fn change(s: &RunState, version: u64, change: DefinitionChange) -> Response {
    let snap = s.snapshot();
    let editor =
        match (s.editor(), snap.status.state) {
            (Some(e), Phase::Running) => e,
            _ if version != snap.definitions.version => return stale(snap.definitions.version, version),
            _ => return error(
                StatusCode::CONFLICT,
                "run_finished",
                "the run is finished: nothing is counting, so definitions cannot change (they can on a live monitor)",
            ),
        };
    match editor.apply(version, change) {
        Ok(v) => Json(json!({"version": v})).into_response(),
        Err(ChangeRefused::StaleVersion { current }) => stale(current, version),
        Err(ChangeRefused::Invalid(m)) => error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_definition", m),
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

async fn add_definition(State(s): State<Shared>, Json(b): Json<ChangeBody>) -> Response {
    change(&s, b.version, DefinitionChange::Add(b.definition))
}

async fn replace_definition(State(s): State<Shared>, Path(name): Path<String>, Json(b): Json<ChangeBody>) -> Response {
    // The line names its definition; the path must agree, or the client replaces another one.
    let named = b.definition.split(|c: char| c.is_whitespace() || c == ':' || c == '=').next().unwrap_or("");
    if named != name {
        return error(
            StatusCode::BAD_REQUEST,
            "name_mismatch",
            format!("the line defines {named:?}, the path {name:?}"),
        );
    }
    change(&s, b.version, DefinitionChange::Replace(b.definition))
}

async fn remove_definition(
    State(s): State<Shared>,
    Path(name): Path<String>,
    Query(q): Query<VersionQuery>,
) -> Response {
    change(&s, q.version, DefinitionChange::Remove(name))
}

#[derive(Debug, Deserialize)]
struct StreamQuery {
    resolution_ms: Option<u64>,
}

async fn events(State(s): State<Shared>, Query(q): Query<StreamQuery>) -> Response {
    let ms = q.resolution_ms.unwrap_or(1000);
    if ms < stream::MIN_RESOLUTION_MS {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_query",
            format!("resolution_ms is at least {}", stream::MIN_RESOLUTION_MS),
        );
    }
    stream::events(&s, ms).into_response()
}

async fn prometheus(State(s): State<Shared>) -> Response {
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], metrics::render(&s.snapshot(), &s.export_counters()))
        .into_response()
}
