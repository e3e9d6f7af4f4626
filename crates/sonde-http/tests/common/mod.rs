//! A small run's snapshot for the handler tests, and a way to call the router without a socket.
#![allow(dead_code)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use sonde_http::{
    router, Access, AssociationSamples, Definition, Definitions, Flows, HistogramRow, IntervalData, IntervalHistograms,
    Intervals, LiveSeries, Phase, QuantileRow, RunState, Snapshot, Status, Table, Tables, TrafficBin, TrafficRow,
};
use tower::ServiceExt;

pub const TCP_LOG: &str = "c_ip\tc_port\ts_ip\ts_port\tc_bytes_all\tc_rtt_avg\tcomplete\n\
10.77.0.1\t31408\t10.77.0.2\t80\t300\t40.417\t1\n\
10.77.0.1\t31409\t10.77.0.2\t443\t1200\t-\t0\n\
fd77::1\t28730\tfd77::2\t80\t90\t40.262\t1\n";
pub const UDP_LOG: &str = "c_ip\tc_port\ts_ip\ts_port\tc_bytes_all\n10.77.0.1\t31460\t10.77.0.2\t7000\t6000\n";

fn interval(index: u64, packets: u64) -> IntervalData {
    IntervalData {
        index,
        start_s: index as f64,
        end_s: index as f64 + 1.0,
        traffic: vec![
            TrafficRow {
                proto: "tcp".into(),
                net: "out".into(),
                packets,
                bytes: packets * 100,
                flows_opened: 2,
                flows_closed: 1,
                flows_active: 3,
            },
            TrafficRow {
                proto: "udp".into(),
                net: "in".into(),
                packets: 1,
                bytes: 60,
                flows_opened: 1,
                flows_closed: 0,
                flows_active: 1,
            },
        ],
        quantiles: vec![QuantileRow {
            metric: "tcp_rtt_avg".into(),
            dir: "c2s".into(),
            net: "out".into(),
            unit: "ms".into(),
            count: 2,
            mean: 40.3,
            min: 40.2,
            p50: 40.2,
            p95: 40.4,
            p99: 40.4,
            max: 40.4,
        }],
    }
}

pub fn snapshot(phase: Phase) -> Snapshot {
    let items = vec![interval(100, 10), interval(101, 20), interval(103, 5)];
    let histograms = items
        .iter()
        .map(|i| IntervalHistograms {
            index: i.index,
            start_s: i.start_s,
            histograms: vec![HistogramRow {
                metric: "tcp_rtt_avg".into(),
                dir: "c2s".into(),
                net: "out".into(),
                unit: "ms".into(),
                bins: vec![[40.0, 40.5, 2.0]],
            }],
        })
        .collect();
    Snapshot {
        status: Status {
            state: phase,
            input: "demo.pcap".into(),
            started_unix_s: 1.0,
            packets: 38,
            bytes: 3800,
            elapsed_s: 0.5,
            first_packet_s: Some(100.0),
            last_packet_s: Some(103.9),
            internal_networks: 1,
            merged: None,
        },
        summary: serde_json::json!({"packets": {"read": 38}}),
        intervals: Intervals { interval_s: 1.0, items, histograms },
        tables: Tables {
            hosts: Table::from_tsv("start\tend\taddr\tpkts_in\n100.0\t101.0\t10.77.0.1\t3\n"),
            matrix: Table::from_tsv("start\tend\tsrc\tdst\tpackets\tbytes\n100.0\t101.0\t10.77.0.1\t10.77.0.2\t3\t300\n"),
            protocols: Table::from_tsv("start\tend\tprotocol\tbytes\n101.0\t102.0\ttcp\t900\n"),
            top: Table::from_tsv("start\tend\tby\trank\taddr\tvalue\n100.0\t101.0\tbytes\t1\t10.77.0.1\t300\n103.0\t104.0\tbytes\t1\t10.77.0.2\t20\n"),
        },
        flows: Flows { tcp: Table::from_tsv(TCP_LOG), udp: Table::from_tsv(UDP_LOG) },
        definitions: Definitions {
            version: 1,
            items: vec![Definition {
                name: "web".into(),
                definition: "web = tcp.dport == 80".into(),
                version: 1,
                retired: false,
                packets: 7,
                bytes: 700,
            }],
            counts: Table::from_tsv("start\tend\tdefinition\tversion\tfid\tpackets\tbytes\n100.0\t101.0\tweb\t1\t-\t7\t700\n"),
            associations: vec![AssociationSamples { name: "rtt".into(), samples: vec![[100.1, 20.0], [100.2, 22.5]] }],
        },
        totals: Vec::new(),
        probes: Vec::new(),
        live: LiveSeries {
            bin_s: 0.01,
            bins: [103.88, 103.89]
                .map(|start_s| TrafficBin { start_s, packets: [1, 2, 0, 0], bytes: [100, 200, 0, 0] })
                .into(),
        },
    }
}

/// A merged view (`sonde serve --merged`) of the fixture's intervals from two probes, one of
/// them with its clock off.
pub fn merged() -> Arc<RunState> {
    let mut snap = snapshot(Phase::Running);
    let probe = |name: &str, offset_s: f64| sonde_http::ProbeRow {
        probe: name.into(),
        last_start_s: 103.0,
        last_end_s: 104.0,
        seen_at_s: 105.0 + offset_s,
        interval_s: 1.0,
        lag_s: 1.0 + offset_s,
        offset_s,
        clock_off: offset_s.abs() > 1.0,
        batch: 7,
    };
    snap.probes = vec![probe("p1", 0.0), probe("p2", 3.5)];
    snap.status.merged = Some(sonde_http::MergedStatus {
        dir: "/merged".into(),
        probes: 2,
        clock_off: vec!["p2".into()],
        intervals: 3,
        max_intervals: 720,
        newest_start_s: Some(103.0),
        newest_end_s: Some(104.0),
        files_read: 4,
        files_unreadable: 1,
        read_failures: 2,
        last_failure: Some("part-9.parquet: not a Parquet file".into()),
        rows_dropped: 0,
        flow_intervals: 3,
        max_table_rows: 100_000,
        table_rows_let_go: 0,
        reloads: 2,
        reloaded_unix_s: 106.0,
    });
    RunState::new(snap)
}

pub fn finished() -> Arc<RunState> {
    let state = RunState::new(snapshot(Phase::Finished));
    state.set_store(store_file().to_path_buf());
    state
}

/// A long-term store for the fixture run, made once per test process: a 300 s step, archives
/// of 5 min × 12 and 30 min × 4 (AVERAGE, MIN, MAX), two series over 20 steps, some unknown.
pub fn store_file() -> &'static std::path::Path {
    static STORE: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> = std::sync::OnceLock::new();
    let (_, path) = STORE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let spec = sonde_rrd::Spec::with_resolutions(
            300,
            vec!["tcp_out_bytes".into(), "rtt_p95".into()],
            &[(300, 3600), (1800, 7200)],
        )
        .unwrap();
        let start_s = 1_700_000_000 - 1_700_000_000 % 1800;
        let mut store = sonde_rrd::Store::create(dir.path().join("link.rrd"), &spec, start_s).unwrap();
        for k in 1..=20u64 {
            let rtt = if k % 7 == 0 { f64::NAN } else { 0.02 + k as f64 / 1000.0 };
            store.update(start_s + k * 300, &[1000.0 * k as f64 + 0.5, rtt]).unwrap();
        }
        let path = dir.path().join("link.rrd");
        (dir, path)
    });
    path
}

/// Sends one request through the router; returns the status and the body's bytes.
pub async fn call(state: Arc<RunState>, access: Access, req: Request<Body>) -> (StatusCode, Vec<u8>) {
    let res = router(state, access).oneshot(req).await.expect("the router is infallible");
    let status = res.status();
    let body = res.into_body().collect().await.expect("body").to_bytes().to_vec();
    (status, body)
}

pub async fn get(state: Arc<RunState>, uri: &str) -> (StatusCode, Value) {
    let (status, body) = call(state, Access::Open, Request::get(uri).body(Body::empty()).unwrap()).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

pub fn json_request(method: &str, uri: &str, body: &Value) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}
