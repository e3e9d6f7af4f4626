//! docs/openapi.json against the server: every documented path and method answers as documented
//! and its JSON matches the documented schema; every route the router has is documented.

mod common;

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, finished};
use serde_json::{json, Value};
use sonde_http::{api_routes, Access, DASHBOARD_PATHS};

fn spec() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("docs/openapi.json")).expect("valid JSON")
}

/// A validator for `schema` whose `$ref`s resolve into the spec's components.
fn validator(spec: &Value, schema: &Value) -> jsonschema::Validator {
    let mut root = schema.clone();
    if let Value::Object(m) = &mut root {
        m.insert("components".into(), spec["components"].clone());
    }
    jsonschema::draft202012::new(&root).expect("the documented schema compiles")
}

/// The documented path with its path parameters replaced by their examples, and its required
/// query parameters that have an example given it.
fn concrete(path: &str, op: &Value) -> String {
    let mut out = path.to_string();
    for p in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
        let name = p["name"].as_str().unwrap();
        out = out.replace(&format!("{{{name}}}"), p["example"].as_str().expect("path parameters have an example"));
    }
    // (A change's `version` has none: the caller gives it.)
    let required = op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["in"] == "query" && p["required"] == true && p["example"].is_string());
    for (i, p) in required.enumerate() {
        let example = p["example"].as_str().unwrap();
        out.push_str(&format!("{}{}={example}", if i == 0 { '?' } else { '&' }, p["name"].as_str().unwrap()));
    }
    out
}

#[test]
fn every_route_is_documented_and_every_documented_path_is_routed() {
    let spec = spec();
    let documented: BTreeSet<&str> = spec["paths"].as_object().unwrap().keys().map(String::as_str).collect();
    let routed: BTreeSet<&str> = api_routes().into_iter().map(|(p, _)| p).chain(DASHBOARD_PATHS).collect();
    assert_eq!(documented, routed);
}

#[tokio::test]
async fn every_documented_operation_answers_as_documented() {
    let spec = spec();
    let mut checked = 0;
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let uri = concrete(path, op);
            let responses = op["responses"].as_object().unwrap();
            let req = match method.as_str() {
                "get" if path == "/api/stream" => continue, // an endless body: tests/stream.rs
                "get" => Request::get(&uri).body(Body::empty()).unwrap(),
                // A finished run refuses every change: the documented 409.
                "post" | "put" => common::json_request(
                    &method.to_uppercase(),
                    &uri,
                    &json!({"version": 1, "definition": "web = tcp.dport == 8080"}),
                ),
                "delete" => Request::delete(format!("{uri}?version=1")).body(Body::empty()).unwrap(),
                other => panic!("undocumented method kind {other}"),
            };
            let (status, body) = call(finished(), Access::Open, req).await;
            let code = status.as_str();
            let documented = responses.get(code).unwrap_or_else(|| panic!("{method} {uri}: {code} is not documented"));
            assert!(status == StatusCode::OK || method != "get", "{method} {uri}: {status}");
            let content = documented["content"].as_object().expect("a documented body");
            if let Some(media) = content.get("application/json") {
                let instance: Value = serde_json::from_slice(&body).expect("JSON body");
                let v = validator(&spec, &media["schema"]);
                let errors: Vec<String> =
                    v.iter_errors(&instance).map(|e| format!("{} at {}", e, e.instance_path)).collect();
                assert!(errors.is_empty(), "{method} {uri}: {errors:?}");
            } else {
                assert!(!body.is_empty(), "{method} {uri}: empty body");
            }
            checked += 1;
        }
    }
    assert!(checked >= 16, "only {checked} operations checked");
}

/// Issue 22: a merged view answers its own routes as documented (status with `merged`, the
/// probes table) and 501, documented, on every route that has no data in it.
#[tokio::test]
async fn a_merged_view_answers_as_documented() {
    let spec = spec();
    let mut refused = 0;
    for (path, item) in spec["paths"].as_object().unwrap() {
        let Some(op) = item.get("get") else { continue };
        if path == "/api/stream" {
            continue;
        }
        let uri = concrete(path, op);
        let (status, body) =
            call(common::merged(), Access::Open, Request::get(&uri).body(Body::empty()).unwrap()).await;
        let documented = &op["responses"][status.as_str()];
        assert!(documented.is_object(), "GET {uri}: {status} is not documented");
        let named = sonde_http::NOT_IN_MERGED_VIEW.iter().any(|p| path == p || path.starts_with(&format!("{p}/")));
        assert_eq!(status == StatusCode::NOT_IMPLEMENTED, named, "GET {uri}: {status}");
        if let Some(media) = documented["content"].get("application/json") {
            let instance: Value = serde_json::from_slice(&body).expect("JSON body");
            let errors: Vec<String> =
                validator(&spec, &media["schema"]).iter_errors(&instance).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "GET {uri}: {errors:?}");
            if named {
                assert_eq!(instance["error"], "not_in_merged_view");
                refused += 1;
            }
        }
    }
    assert!(refused >= 6, "only {refused} refusals checked");
    let (_, status) = common::get(common::merged(), "/api/status").await;
    assert_eq!(status["merged"]["clock_off"], json!(["p2"]));
    let (_, probes) = common::get(common::merged(), "/api/probes").await;
    assert_eq!(probes["merged"], true);
    assert_eq!(probes["items"][1]["clock_off"], true);
    assert_eq!(probes["items"][0]["clock_off"], false);
    // A change is refused the same way, before the (absent) engine is asked.
    let req = common::json_request("POST", "/api/definitions", &json!({"version": 1, "definition": "web = tcp"}));
    assert_eq!(call(common::merged(), Access::Open, req).await.0, StatusCode::NOT_IMPLEMENTED);
    // One run's server has no probe table and says so; its status has no `merged`.
    let (_, probes) = common::get(finished(), "/api/probes").await;
    assert_eq!(probes, json!({"merged": false, "items": []}));
    let (_, status) = common::get(finished(), "/api/status").await;
    assert!(status.get("merged").is_none());
}

#[test]
fn the_schemas_reject_what_they_should() {
    // The check above would pass with schemas that accept anything: these must fail.
    let spec = spec();
    let status = validator(&spec, &json!({"$ref": "#/components/schemas/Status"}));
    assert!(!status.is_valid(&json!({"state": "paused"})));
    assert!(!status.is_valid(&json!({})));
    let page = validator(&spec, &json!({"$ref": "#/components/schemas/FlowPage"}));
    assert!(!page.is_valid(&json!({"proto": "tcp", "total": -1, "offset": 0, "limit": 1, "columns": [], "rows": []})));
}

#[tokio::test]
async fn the_streams_first_event_matches_its_schema() {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let spec = spec();
    let req = Request::get("/api/stream?resolution_ms=10").body(Body::empty()).unwrap();
    let res = sonde_http::router(finished(), Access::Open).oneshot(req).await.unwrap();
    let mut body = res.into_body();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame()).await.unwrap();
        text.push_str(std::str::from_utf8(&frame.unwrap().unwrap().into_data().unwrap()).unwrap());
    }
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).expect("a data line");
    let instance: Value = serde_json::from_str(data).unwrap();
    let schema = &spec["paths"]["/api/stream"]["get"]["responses"]["200"]["content"]["text/event-stream"]["schema"];
    let errors: Vec<String> = validator(&spec, schema).iter_errors(&instance).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}
