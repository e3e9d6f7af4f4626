//! `/api/store` and `/api/store/series`: the long-term store's series at each resolution, equal
//! to what `sonde ts dump` prints for the same store (`Store::dump_csv`, which it runs), bounded,
//! counted, and refused with a reason.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, finished, snapshot, store_file};
use serde_json::Value;
use sonde_http::{router_with, Access, Limits, Phase, RunState};

async fn get(state: std::sync::Arc<RunState>, uri: &str) -> (StatusCode, Value) {
    let (status, body) = call(state, Access::Open, Request::get(uri).body(Body::empty()).unwrap()).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The `points` of an answer, their numbers read by Rust's exact parser (serde_json's default
/// one may be a unit in the last place off).
async fn points(uri: &str) -> Vec<(i64, Option<f64>)> {
    let (status, body) = call(finished(), Access::Open, Request::get(uri).body(Body::empty()).unwrap()).await;
    let text = String::from_utf8(body).unwrap();
    assert_eq!(status, StatusCode::OK, "{text}");
    let list = text.split_once("\"points\":[").unwrap().1;
    let list = &list[..list.find("]]").map_or(0, |i| i + 1)];
    list.split("],[")
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (t, v) = p.trim_matches(['[', ']']).split_once(',').unwrap();
            (t.parse().unwrap(), (v != "null").then(|| v.parse().unwrap()))
        })
        .collect()
}

/// One line of `ts dump`: archive, cf, resolution_s, time_s, values (None where empty).
type DumpRow = (usize, String, u64, i64, Vec<Option<f64>>);

/// `ts dump`'s series names and rows.
fn dump() -> (Vec<String>, Vec<DumpRow>) {
    let store = sonde_rrd::Store::open_read_only(store_file()).unwrap();
    let mut csv = Vec::new();
    store.dump_csv(&mut csv).unwrap();
    let text = String::from_utf8(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').skip(4).map(str::to_string).collect();
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let values = f[4..].iter().map(|v| (!v.is_empty()).then(|| v.parse().unwrap())).collect();
            (f[0].parse().unwrap(), f[1].to_string(), f[2].parse().unwrap(), f[3].parse().unwrap(), values)
        })
        .collect();
    (header, rows)
}

#[tokio::test]
async fn the_listing_names_every_series_and_archive() {
    let (status, body) = get(finished(), "/api/store").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], "link.rrd");
    assert_eq!(body["step_s"], 300);
    assert_eq!(body["series"], serde_json::json!(["tcp_out_bytes", "rtt_p95"]));
    assert_eq!(body["resolutions_s"], serde_json::json!([300, 1800]));
    assert_eq!(body["max_points"], Limits::default().max_store_points);
    let archives = body["archives"].as_array().unwrap();
    let shape: Vec<(&str, u64, u64)> = archives
        .iter()
        .map(|a| (a["cf"].as_str().unwrap(), a["resolution_s"].as_u64().unwrap(), a["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        shape,
        [
            ("AVERAGE", 300, 12),
            ("MIN", 300, 12),
            ("MAX", 300, 12),
            ("AVERAGE", 1800, 4),
            ("MIN", 1800, 4),
            ("MAX", 1800, 4)
        ]
    );
    let last = body["last_update_s"].as_i64().unwrap();
    assert_eq!(archives[0]["last_s"].as_i64(), Some(last));
    assert_eq!(archives[0]["first_s"].as_i64(), Some(last - 11 * 300));
}

#[tokio::test]
async fn every_series_at_every_resolution_equals_the_dump() {
    let (names, rows) = dump();
    let (_, listing) = get(finished(), "/api/store").await;
    let mut compared = 0;
    let mut unknown = 0;
    for archive in listing["archives"].as_array().unwrap() {
        let (a, cf, res) = (
            archive["archive"].as_u64().unwrap() as usize,
            archive["cf"].as_str().unwrap(),
            archive["resolution_s"].as_u64().unwrap(),
        );
        for (s, name) in names.iter().enumerate() {
            let uri = format!("/api/store/series?name={name}&resolution_s={res}&cf={}", cf.to_lowercase());
            let (status, body) = get(finished(), &uri).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["archive"].as_u64(), Some(a as u64));
            assert_eq!((body["cf"].as_str(), body["resolution_s"].as_u64()), (Some(cf), Some(res)));
            let served = points(&uri).await;
            let dumped: Vec<(i64, Option<f64>)> = rows.iter().filter(|r| r.0 == a).map(|r| (r.3, r.4[s])).collect();
            assert_eq!(served, dumped, "{name} in archive {a}");
            compared += served.len();
            unknown += served.iter().filter(|p| p.1.is_none()).count();
        }
    }
    assert_eq!(compared, 2 * 3 * (12 + 4));
    assert!(unknown > 0 && unknown < compared / 2, "{unknown} unknown of {compared}");
}

#[tokio::test]
async fn a_range_gives_the_rows_ending_in_it_and_the_defaults_are_the_finest_average() {
    let (_, all) = get(finished(), "/api/store/series?name=tcp_out_bytes").await;
    assert_eq!((all["cf"].as_str(), all["resolution_s"].as_u64()), (Some("AVERAGE"), Some(300)));
    let points = all["points"].as_array().unwrap();
    assert_eq!(points.len(), 12);
    let t = |i: usize| points[i][0].as_i64().unwrap();
    // From a time between rows to a row's own end time: the rows ending within.
    let uri = format!("/api/store/series?name=tcp_out_bytes&start_s={}&end_s={}", t(3) - 1, t(7));
    let (status, part) = get(finished(), &uri).await;
    assert_eq!(status, StatusCode::OK, "{part}");
    assert_eq!(part["points"].as_array().unwrap()[..], points[3..=7]);
    let (_, none) = get(finished(), &format!("/api/store/series?name=tcp_out_bytes&start_s={}", t(11) + 1)).await;
    assert_eq!(none["points"], serde_json::json!([]));
}

#[tokio::test]
async fn answers_are_bounded_and_counted() {
    let state = finished();
    let limits = Limits { max_store_points: 4, ..Limits::default() };
    let ask = |uri: &str| {
        let app = router_with(state.clone(), Access::Open, &limits);
        let req = Request::get(uri).body(Body::empty()).unwrap();
        async move {
            use tower::ServiceExt;
            app.oneshot(req).await.unwrap().status()
        }
    };
    // 12 rows of 5 minutes: refused; the 4 rows of 30 minutes: answered; 4 rows of 5 minutes too.
    assert_eq!(ask("/api/store/series?name=rtt_p95&resolution_s=300").await, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(ask("/api/store/series?name=rtt_p95&resolution_s=1800").await, StatusCode::OK);
    let (_, all) = get(finished(), "/api/store/series?name=rtt_p95").await;
    let t8 = all["points"][8][0].as_i64().unwrap();
    assert_eq!(ask(&format!("/api/store/series?name=rtt_p95&start_s={t8}")).await, StatusCode::OK);
    assert_eq!(ask("/api/store/series?name=nope").await, StatusCode::NOT_FOUND);
    let metrics = ask("/metrics").await;
    assert_eq!(metrics, StatusCode::OK);
    let text = sonde_http::render_metrics(&state.snapshot(), &state.export_counters());
    for (outcome, n) in [("answered", 2), ("too_many_points", 1), ("refused", 1)] {
        let line = format!("sonde_http_store_queries_total{{outcome=\"{outcome}\"}} {n}");
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}

#[tokio::test]
async fn refusals_say_why() {
    for (uri, status, code) in [
        ("/api/store/series?name=nope", StatusCode::NOT_FOUND, "no_series"),
        ("/api/store/series?name=rtt_p95&resolution_s=600", StatusCode::NOT_FOUND, "no_archive"),
        ("/api/store/series?name=rtt_p95&cf=LAST", StatusCode::NOT_FOUND, "no_archive"),
        ("/api/store/series?name=rtt_p95&cf=median", StatusCode::BAD_REQUEST, "bad_query"),
        ("/api/store/series?name=rtt_p95&start_s=10&end_s=5", StatusCode::BAD_REQUEST, "bad_query"),
        ("/api/store/series?name=rtt_p95&start_s=soon", StatusCode::BAD_REQUEST, "bad_query"),
        ("/api/store/series", StatusCode::BAD_REQUEST, "bad_query"),
    ] {
        let (s, body) = get(finished(), uri).await;
        assert_eq!((s, body["error"].as_str()), (status, Some(code)), "{uri}: {body}");
    }
    // A run without a store, and a store that is not one.
    let none = RunState::new(snapshot(Phase::Finished));
    for uri in ["/api/store", "/api/store/series?name=rtt_p95"] {
        let (s, body) = get(none.clone(), uri).await;
        assert_eq!((s, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("no_store")), "{uri}");
    }
    let dir = tempfile::tempdir().unwrap();
    // A monitor's store before its first run has ended: not there yet.
    let later = RunState::new(snapshot(Phase::Running));
    later.set_store(dir.path().join("not-yet.rrd"));
    let (s, body) = get(later, "/api/store").await;
    assert_eq!((s, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("no_store")), "{body}");
    let bad = dir.path().join("bad.rrd");
    std::fs::write(&bad, b"not a store at all").unwrap();
    let broken = RunState::new(snapshot(Phase::Finished));
    broken.set_store(bad);
    let (s, body) = get(broken, "/api/store").await;
    assert_eq!((s, body["error"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("store_unreadable")), "{body}");
}
