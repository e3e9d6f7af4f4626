//! `/metrics` read by a strict parser of the Prometheus text format 0.0.4: every sample belongs to
//! a family announced by exactly one HELP and one TYPE before it, names and labels are valid,
//! label values are escaped, counters end in `_total`, a family's samples are contiguous and no
//! series repeats.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, finished};
use sonde_http::{render_metrics, Access};

#[derive(Debug, Default)]
struct Family {
    kind: String,
    samples: Vec<(BTreeMap<String, String>, f64)>,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label(name: &str) -> bool {
    valid_name(name) && !name.contains(':') && !name.starts_with("__")
}

/// `{a="x",b="y"}` → labels; the text after.
fn labels(text: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut out = BTreeMap::new();
    let Some(mut rest) = text.strip_prefix('{') else { return Ok((out, text)) };
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((out, after));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = &rest[..eq];
        if !valid_label(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..].strip_prefix('"').ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().ok_or("unterminated label value")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("dangling escape")?.1 {
                    'n' => value.push('\n'),
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    c => return Err(format!("bad escape \\{c}")),
                },
                (_, '\n') => return Err("newline in label value".into()),
                (_, c) => value.push(c),
            }
        };
        if out.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &rest[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn parse(text: &str) -> Result<BTreeMap<String, Family>, String> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut helped = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut closed = BTreeSet::new();
    if !text.ends_with('\n') {
        return Err("no final newline".into());
    }
    for (n, line) in text.lines().enumerate() {
        let err = |m: String| format!("line {}: {m}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').ok_or_else(|| err("HELP without text".into()))?;
            if !valid_name(name) || !helped.insert(name.to_string()) || help.is_empty() {
                return Err(err("bad or repeated HELP".into()));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or_else(|| err("TYPE without type".into()))?;
            if !["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind) {
                return Err(err(format!("type {kind}")));
            }
            if families.contains_key(name) || !helped.contains(name) {
                return Err(err("TYPE repeated, or before its HELP".into()));
            }
            if kind == "counter" && !name.ends_with("_total") {
                return Err(err("a counter's name ends in _total".into()));
            }
            if let Some(prev) = current.replace(name.to_string()) {
                closed.insert(prev);
            }
            families.insert(name.to_string(), Family { kind: kind.into(), samples: Vec::new() });
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            return Err(err("stray comment or blank line".into()));
        }
        let end = line.find(['{', ' ']).ok_or_else(|| err("sample without value".into()))?;
        let sample = &line[..end];
        // A summary's samples: the family's name (with `quantile`), `_sum` and `_count`.
        let (name, part) = match current.as_deref() {
            Some(family) if families[family].kind == "summary" && sample != family => {
                match sample.strip_prefix(family).filter(|p| ["_sum", "_count"].contains(p)) {
                    Some(part) => (family, part),
                    None => (sample, ""),
                }
            }
            _ => (sample, ""),
        };
        if current.as_deref() != Some(name) || closed.contains(name) {
            return Err(err(format!("sample of {name} outside its family's block")));
        }
        let (mut labels, rest) = labels(&line[end..]).map_err(err)?;
        if families[name].kind == "summary" && part.is_empty() != labels.contains_key("quantile") {
            return Err(err("a summary's quantile samples, and only they, have a quantile label".into()));
        }
        if !part.is_empty() {
            labels.insert("__part__".into(), part.into());
        }
        let value = rest.strip_prefix(' ').ok_or_else(|| err("no space before the value".into()))?;
        let value: f64 = match value {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| err(format!("value {v:?}")))?,
        };
        let family = families.get_mut(name).expect("current family");
        if family.samples.iter().any(|(l, _)| *l == labels) {
            return Err(err("series repeated".into()));
        }
        if family.kind == "counter" && (value.is_nan() || value < 0.0) {
            return Err(err("a counter is never negative".into()));
        }
        family.samples.push((labels, value));
    }
    if helped.len() != families.len() {
        return Err("HELP without TYPE".into());
    }
    Ok(families)
}

#[tokio::test]
async fn the_exposition_parses_strictly_and_holds_the_runs_figures() {
    let (status, body) = call(finished(), Access::Open, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    let families = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let one = |name: &str| families[name].samples[0].1;
    assert_eq!(one("sonde_packets_total"), 38.0);
    assert_eq!(one("sonde_bytes_total"), 3800.0);
    assert_eq!(one("sonde_run_finished"), 1.0);
    // TCP out: 10 + 20 + 5 packets over the three intervals; the labels say which.
    let tcp_out = &families["sonde_traffic_packets_total"].samples;
    // Issue 23: the labels are named as the interval files' columns (proto, net, dir).
    let (labels, value) = tcp_out.iter().find(|(l, _)| l["proto"] == "tcp").unwrap();
    assert_eq!((labels["net"].as_str(), *value), ("out", 35.0));
    // The RTT distribution as a summary in seconds, the unit in the name: quantiles, count, sum.
    let rtt = &families["sonde_tcp_rtt_avg_seconds"];
    assert_eq!(rtt.kind, "summary");
    let sample = |key: &str, value: &str| {
        rtt.samples.iter().find(|(l, _)| l.get(key).map(String::as_str) == Some(value)).unwrap().1
    };
    assert!((sample("quantile", "0.5") - 0.0402).abs() < 1e-9);
    let (count, sum) = (sample("__part__", "_count"), sample("__part__", "_sum"));
    assert!(count > 0.0 && sum > 0.0, "{count} {sum}");
    assert_eq!(families["sonde_build_info"].samples[0].0["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(one("sonde_definition_packets_total"), 7.0);
}

#[test]
fn a_live_runs_totals_count_beyond_its_recent_intervals() {
    // A live snapshot keeps only recent intervals; the counters come from the run's totals, so
    // they never go down when old intervals leave the window.
    let mut snap = common::snapshot(sonde_http::Phase::Running);
    snap.totals = vec![sonde_http::TrafficRow {
        proto: "tcp".into(),
        net: "out".into(),
        packets: 1_000,
        bytes: 90_000,
        flows_opened: 7,
        flows_closed: 5,
        flows_active: 0,
    }];
    let text = render_metrics(&snap, &[]);
    let families = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let tcp = |name: &str| families[name].samples.iter().find(|(l, _)| l["proto"] == "tcp").unwrap().1;
    assert_eq!(tcp("sonde_traffic_packets_total"), 1_000.0);
    assert_eq!(tcp("sonde_flows_opened_total"), 7.0);
}

/// Issue 22: a merged view's reading counters and its probes' clocks, one series per probe.
#[tokio::test]
async fn a_merged_view_exposes_its_files_and_probes() {
    let (status, body) =
        call(common::merged(), Access::Open, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    let families = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(families["sonde_merged_files_read_total"].samples[0].1, 4.0);
    assert_eq!(families["sonde_merged_read_failures_total"].samples[0].1, 2.0);
    assert_eq!(families["sonde_merged_files_unreadable"].samples[0].1, 1.0);
    let probe = |family: &str, name: &str| {
        families[family].samples.iter().find(|(l, _)| l["probe"] == name).unwrap_or_else(|| panic!("{family} {name}")).1
    };
    assert_eq!((probe("sonde_probe_clock_off", "p1"), probe("sonde_probe_clock_off", "p2")), (0.0, 1.0));
    assert_eq!(probe("sonde_probe_offset_seconds", "p2"), 3.5);
    assert_eq!(probe("sonde_probe_lag_seconds", "p2"), 4.5);
    // One run's server has none of these.
    let text = render_metrics(&common::snapshot(sonde_http::Phase::Finished), &[]);
    assert!(!text.contains("sonde_merged_") && !text.contains("sonde_probe_"), "{text}");
}

#[test]
fn exporters_counters_are_counter_families_with_their_labels() {
    let snap = common::snapshot(sonde_http::Phase::Running);
    let counter = |outcome, value| sonde_http::ExportCounter {
        name: "sonde_kafka_messages_total",
        help: "Kafka messages by outcome.",
        labels: vec![("outcome", outcome)],
        value,
    };
    let text = render_metrics(&snap, &[counter("sent", 15), counter("delivered", 14)]);
    let families = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let kafka = &families["sonde_kafka_messages_total"];
    assert_eq!(kafka.kind, "counter");
    let by = |o: &str| kafka.samples.iter().find(|(l, _)| l["outcome"] == o).unwrap().1;
    assert_eq!((by("sent"), by("delivered")), (15.0, 14.0));
}

#[test]
fn label_values_are_escaped() {
    let mut snap = common::snapshot(sonde_http::Phase::Running);
    snap.definitions.items[0].name = "we\"ird\\name\nx".into();
    let text = render_metrics(&snap, &[]);
    let families = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(families["sonde_definition_bytes_total"].samples[0].0["definition"], "we\"ird\\name\nx");
}

#[test]
fn the_parser_is_strict() {
    for bad in [
        "x 1\n",
        "# HELP x h\n# TYPE x counter\nx 1\n",
        "# HELP x_total h\n# TYPE x_total counter\nx_total{a=\"1\"} 1\nx_total{a=\"1\"} 2\n",
        "# HELP x h\n# TYPE x gauge\nx{a=1} 1\n",
        "# HELP x h\n# TYPE x gauge\nx 1",
        "# HELP x h\n# TYPE x gauge\n# HELP y h\n# TYPE y gauge\ny 1\nx 1\n",
        "# HELP x_total h\n# TYPE x_total counter\nx_total -1\n",
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
}
