//! The JSON API through the router, without a socket (`tower::ServiceExt::oneshot`).

mod common;

use std::sync::Mutex;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, finished, get, json_request, snapshot};
use serde_json::{json, Value};
use sonde_http::{Access, ChangeRefused, DefinitionChange, DefinitionEditor, Phase, RunState};

#[tokio::test]
async fn status_summary_and_intervals() {
    let (code, s) = get(finished(), "/api/status").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!((s["state"].as_str(), s["packets"].as_u64()), (Some("finished"), Some(38)));
    let (_, summary) = get(finished(), "/api/summary").await;
    assert_eq!(summary["packets"]["read"], 38);
    let (_, all) = get(finished(), "/api/intervals").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    let (_, since) = get(finished(), "/api/intervals?since=101").await;
    let starts: Vec<_> = since["items"].as_array().unwrap().iter().map(|i| i["start_s"].as_f64().unwrap()).collect();
    assert_eq!(starts, [101.0, 103.0]);
    let (_, current) = get(finished(), "/api/intervals/current").await;
    assert_eq!(current["index"], 103);
    let (_, h) = get(finished(), "/api/histograms?since=103&metric=tcp_rtt_avg").await;
    assert_eq!(h["items"][0]["histograms"][0]["bins"], json!([[40.0, 40.5, 2.0]]));
    let (_, none) = get(finished(), "/api/histograms?metric=ip_len").await;
    assert!(none["items"].as_array().unwrap().iter().all(|i| i["histograms"].as_array().unwrap().is_empty()));
}

#[tokio::test]
async fn no_interval_is_a_404() {
    let state = RunState::new(sonde_http::Snapshot::default());
    let (code, body) = get(state, "/api/intervals/current").await;
    assert_eq!((code, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("no_interval")));
}

#[tokio::test]
async fn tables_by_name_and_time() {
    let (_, list) = get(finished(), "/api/tables").await;
    assert_eq!(list["items"][3], json!({"name": "top", "rows": 2}));
    let (_, top) = get(finished(), "/api/tables/top?since=103").await;
    assert_eq!(top["rows"], json!([[103.0, 104.0, "bytes", 1, "10.77.0.2", 20]]));
    let (code, _) = get(finished(), "/api/tables/nope").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn flows_are_filtered_sorted_and_paged_on_the_server() {
    let (_, page) = get(finished(), "/api/flows?sort=c_bytes_all&order=desc&limit=2").await;
    assert_eq!((page["total"].as_u64(), page["rows"].as_array().unwrap().len()), (Some(3), 2));
    let bytes: Vec<_> = page["rows"].as_array().unwrap().iter().map(|r| r[4].as_u64().unwrap()).collect();
    assert_eq!(bytes, [1200, 300]);
    let (_, page) = get(finished(), "/api/flows?addr=10.77.0.2&complete=true").await;
    assert_eq!(page["total"], 1);
    assert_eq!(page["rows"][0][1], 31408);
    let (_, page) = get(finished(), "/api/flows?port=80&offset=1").await;
    assert_eq!((page["total"].as_u64(), page["rows"][0][0].as_str()), (Some(2), Some("fd77::1")));
    // A missing RTT ('-') sorts first, as null.
    let (_, page) = get(finished(), "/api/flows?sort=c_rtt_avg").await;
    assert_eq!(page["rows"][0][5], Value::Null);
    let (_, page) = get(finished(), "/api/flows?proto=udp").await;
    assert_eq!(page["rows"][0][3], 7000);
    for bad in
        ["/api/flows?proto=sctp", "/api/flows?sort=nope", "/api/flows?proto=udp&complete=true", "/api/flows?port=x"]
    {
        let (code, _) = get(finished(), bad).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn definitions_and_their_counts() {
    let (_, defs) = get(finished(), "/api/definitions").await;
    assert_eq!((defs["version"].as_u64(), defs["editable"].as_bool()), (Some(1), Some(false)));
    assert_eq!(defs["items"][0]["name"], "web");
    let (_, counts) = get(finished(), "/api/definitions/counts?name=web").await;
    assert_eq!(counts["rows"][0][5], 7);
    let (_, counts) = get(finished(), "/api/definitions/counts?name=other").await;
    assert!(counts["rows"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn a_finished_run_refuses_changes_and_a_stale_version_is_a_conflict() {
    let add = |version: u64| {
        json_request("POST", "/api/definitions", &json!({"version": version, "definition": "dns = udp.dport == 53"}))
    };
    let (code, body) = call(finished(), Access::Open, add(1)).await;
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((code, body["error"].as_str()), (StatusCode::CONFLICT, Some("run_finished")));
    let (code, body) = call(finished(), Access::Open, add(0)).await;
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (code, body["error"].as_str(), body["version"].as_u64()),
        (StatusCode::CONFLICT, Some("stale_version"), Some(1))
    );
    let put =
        json_request("PUT", "/api/definitions/web", &json!({"version": 1, "definition": "web = tcp.dport == 8080"}));
    assert_eq!(call(finished(), Access::Open, put).await.0, StatusCode::CONFLICT);
    let put =
        json_request("PUT", "/api/definitions/web", &json!({"version": 1, "definition": "other = tcp.dport == 8080"}));
    assert_eq!(call(finished(), Access::Open, put).await.0, StatusCode::BAD_REQUEST);
    let del = Request::delete("/api/definitions/web?version=1").body(Body::empty()).unwrap();
    assert_eq!(call(finished(), Access::Open, del).await.0, StatusCode::CONFLICT);
    let del = Request::delete("/api/definitions/web").body(Body::empty()).unwrap();
    assert_eq!(call(finished(), Access::Open, del).await.0, StatusCode::BAD_REQUEST);
}

/// An engine stand-in: records changes and bumps the version, as the counter does.
struct Recorder(Mutex<(u64, Vec<DefinitionChange>)>);

impl DefinitionEditor for Recorder {
    fn apply(&self, expected: u64, change: DefinitionChange) -> Result<u64, ChangeRefused> {
        let mut g = self.0.lock().unwrap();
        if expected != g.0 {
            return Err(ChangeRefused::StaleVersion { current: g.0 });
        }
        if matches!(&change, DefinitionChange::Add(l) if !l.contains('=')) {
            return Err(ChangeRefused::Invalid("line 1, column 1: expected =".into()));
        }
        g.0 += 1;
        g.1.push(change);
        Ok(g.0)
    }
}

#[tokio::test]
async fn a_running_run_hands_changes_to_its_engine() {
    let state = RunState::with_editor(snapshot(Phase::Running), Some(Box::new(Recorder(Mutex::new((1, Vec::new()))))));
    let bad = json_request("POST", "/api/definitions", &json!({"version": 1, "definition": "nonsense"}));
    assert_eq!(call(state.clone(), Access::Open, bad).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    let add = json_request("POST", "/api/definitions", &json!({"version": 1, "definition": "dns = udp.dport == 53"}));
    let (code, body) = call(state.clone(), Access::Open, add).await;
    assert_eq!((code, serde_json::from_slice::<Value>(&body).unwrap()), (StatusCode::OK, json!({"version": 2})));
    // The snapshot still says version 1 (the engine publishes the next): the engine's answer
    // decides, and a second change against 1 is stale there.
    let again =
        json_request("POST", "/api/definitions", &json!({"version": 1, "definition": "ntp = udp.dport == 123"}));
    assert_eq!(call(state, Access::Open, again).await.0, StatusCode::CONFLICT);
}

#[tokio::test]
async fn unknown_paths_are_404_json() {
    let (code, body) = get(finished(), "/api/nope").await;
    assert_eq!((code, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
}

#[tokio::test]
async fn the_dashboard_is_embedded_and_names_its_own_files_only() {
    let (code, body) = call(finished(), Access::Open, Request::get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(code, StatusCode::OK);
    let html = String::from_utf8(body).unwrap();
    assert!(html.contains("/assets/app.js") && html.contains("/assets/style.css"));
    // No CDN: every script and style sheet is served by sonde itself.
    assert!(!html.contains("http://") && !html.contains("https://"), "external reference in index.html");
    for path in ["/assets/app.js", "/assets/style.css"] {
        let (code, body) = call(finished(), Access::Open, Request::get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(code, StatusCode::OK);
        let text = String::from_utf8(body).unwrap();
        assert!(!text.contains("https://"), "{path} loads something from outside");
    }
}

/// `monitor --kafka-control`: `/api/status` carries the control object as read at the request,
/// and `/metrics` its version as a gauge; without, neither.
#[tokio::test]
async fn control_state_in_status_and_metrics() {
    let state = finished();
    let (_, before) = get(state.clone(), "/api/status").await;
    assert!(before.get("control").is_none());
    let version = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(2));
    let read = version.clone();
    assert!(state.set_control(Box::new(move || json!({"version": read.load(std::sync::atomic::Ordering::Relaxed)}))));
    let (_, s) = get(state.clone(), "/api/status").await;
    assert_eq!((s["control"]["version"].as_u64(), s["packets"].as_u64()), (Some(2), Some(38)));
    version.store(3, std::sync::atomic::Ordering::Relaxed);
    let req = Request::get("/metrics").body(Body::empty()).unwrap();
    let (code, body) = call(state.clone(), Access::Open, req).await;
    let text = String::from_utf8(body).unwrap();
    assert_eq!(code, StatusCode::OK);
    assert!(text.contains("# TYPE sonde_control_version gauge\nsonde_control_version 3\n"), "{text}");
    let req = Request::get("/metrics").body(Body::empty()).unwrap();
    let (_, plain) = call(finished(), Access::Open, req).await;
    assert!(!String::from_utf8(plain).unwrap().contains("sonde_control_version"));
}
