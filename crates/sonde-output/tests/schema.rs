//! The published JSON Schema of summary.json (`docs/schema/summary.schema.json`): the committed
//! file is what the types generate (regenerate with `UPDATE_SCHEMA=1`, review the diff), and
//! summaries the binary cannot be run for here (`sonde monitor` needs root and interfaces) are
//! valid against it.

use std::path::PathBuf;

use serde_json::{json, Value};
use sonde_engine::{Outcome, RunStats};
use sonde_output::summary::{
    AnonSummary, CaptureSummary, ChangeSummary, ControlSummary, DefinitionSummary, Input, InterfaceCounters,
    LocationSummary, Monitoring, SpoolSummary, StoreReport, TcpdprivSummary, Timing,
};
use sonde_output::Summary;

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema/summary.schema.json")
}

fn committed_schema() -> Value {
    let text =
        std::fs::read_to_string(schema_path()).expect("docs/schema/summary.schema.json (UPDATE_SCHEMA=1 makes it)");
    serde_json::from_str(&text).expect("the committed schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&committed_schema()).expect("the committed schema is a valid JSON Schema")
}

/// Every error of `instance`, one per line (empty when valid).
fn errors(validator: &jsonschema::Validator, instance: &Value) -> String {
    validator.iter_errors(instance).map(|e| format!("{} at {}\n", e, e.instance_path)).collect()
}

#[test]
fn committed_schema_is_generated() {
    let generated = Summary::schema_json();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(schema_path(), &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(schema_path()).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/schema/summary.schema.json is not what the summary types generate: run \
         `UPDATE_SCHEMA=1 cargo test -p sonde-output --test schema` and review the diff"
    );
}

/// Every field has a description (schemars takes them from the `///` docs).
#[test]
fn every_field_is_described() {
    fn walk(path: &str, schema: &Value, missing: &mut Vec<String>) {
        let Some(object) = schema.as_object() else { return };
        if let Some(Value::Object(properties)) = object.get("properties") {
            for (name, property) in properties {
                if property.get("description").is_none() {
                    missing.push(format!("{path}.{name}"));
                }
                walk(&format!("{path}.{name}"), property, missing);
            }
        }
        for (key, value) in object.iter().filter(|(k, _)| *k != "properties") {
            match value {
                Value::Object(_) => walk(&format!("{path}/{key}"), value, missing),
                Value::Array(items) => items.iter().for_each(|v| walk(&format!("{path}/{key}"), v, missing)),
                _ => {}
            }
        }
    }
    let mut missing = Vec::new();
    walk("", &committed_schema(), &mut missing);
    assert!(missing.is_empty(), "fields without a doc comment: {missing:?}");
}

fn summary() -> Summary {
    let outcome = Outcome { stats: RunStats::default(), input_error: None };
    let timing = Timing {
        elapsed_s: 1.5,
        cpu_s: 1.25,
        peak_rss_bytes: 1 << 20,
        peak_anon_bytes: 1 << 19,
        peak_file_bytes: 1 << 19,
        mean_anon_bytes: 1 << 18,
        readers: 2,
        workers: 2,
    };
    let outputs = ["tcp_flows.tsv", "udp_flows.tsv", "capture.tsv", "summary.json"].map(String::from).to_vec();
    let input =
        Input { name: "eth0,eth1".into(), format: "live".into(), compression: None, filter: Some("tcp".into()) };
    let mut summary = Summary::new(input, outcome, timing);
    summary.outputs = outputs;
    summary
}

/// `sonde monitor --spool`: the capture and spool sections, as monitor.rs and rotate.rs fill
/// them, are valid.
#[test]
fn a_monitor_summary_is_valid() {
    let mut s = summary();
    s.monitoring = Some(Monitoring {
        interval_s: 1.0,
        intervals: 3,
        tables: true,
        table_overflows: 0,
        store: Some(StoreReport { path: "/var/lib/sonde.rrd".into(), created: true, updates: 3, already_stored: 0 }),
    });
    s.capture = Some(CaptureSummary {
        backend: "afpacket",
        buffer_bytes: 64 << 20,
        promisc: false,
        user: Some("sonde".into()),
        received_pkts: 12,
        dropped_pkts: 1,
        if_dropped_pkts: 0,
        unread_pkts: 1,
        interfaces: vec![
            InterfaceCounters {
                interface: "eth0".into(),
                received_pkts: 10,
                dropped_pkts: 1,
                if_dropped_pkts: 0,
                unread_pkts: 1,
            },
            InterfaceCounters {
                interface: "eth1".into(),
                received_pkts: 2,
                dropped_pkts: 0,
                if_dropped_pkts: 0,
                unread_pkts: 0,
            },
        ],
        readers_received_pkts: vec![7, 5],
    });
    s.spool = Some(SpoolSummary {
        chunks: 2,
        bytes: 4096,
        over_quota_chunks: 0,
        failed_chunks: 0,
        locations: vec![
            LocationSummary { path: "/data1".into(), used_bytes: 4096, quota_bytes: Some(1 << 30), chunks_written: 2 },
            LocationSummary { path: "/data2".into(), used_bytes: 0, quota_bytes: None, chunks_written: 0 },
        ],
        leftovers: vec!["/data1/c1/tcp_flows.tsv.part (10 bytes, removed)".into()],
        last_chunk_in_output_dir: false,
    });
    s.interrupted_by = Some("SIGTERM".into());
    s.control = Some(ControlSummary {
        topic: "sonde-control".into(),
        status_topic: "sonde-probes".into(),
        probe: "p1".into(),
        version: 3,
        since: Some(1795307597.25),
        changes_applied: 2,
        changes_failed: 1,
        last_error: Some("removing `syn`: `syn` is used by the association `connection`".into()),
    });
    s.definitions = Some(vec![DefinitionSummary {
        summary: sonde_types::DefinitionSummary {
            name: "web".into(),
            definition: "web: tcp.dport == 443".into(),
            version: 1,
            retired: false,
            packets: 4,
            bytes: 400,
        },
        fid_rows: 2,
        overflow_packets: 0,
        untracked_packets: 0,
    }]);
    s.definition_changes = Some(vec![ChangeSummary {
        at_s: 1.5,
        change: "remove web".into(),
        result: "applied".into(),
        version: Some(2),
    }]);
    s.anonymization = Some(AnonSummary {
        mode: "prefix",
        key_file: Some("/etc/sonde.key".into()),
        key_created: false,
        tcpdpriv: Some(TcpdprivSummary { addresses: 2, max_addresses: 10, unmapped: 0 }),
    });
    let v = validator();
    let instance: Value = serde_json::from_str(&s.to_json()).unwrap();
    assert_eq!(errors(&v, &instance), "");
    // A single reader leaves out readers_received_pkts; still valid.
    s.capture.as_mut().unwrap().readers_received_pkts.clear();
    let instance: Value = serde_json::from_str(&s.to_json()).unwrap();
    assert!(instance["capture"].get("readers_received_pkts").is_none());
    assert_eq!(errors(&v, &instance), "");
}

/// The schema's definitions of the capture and spool sections, on their own.
#[test]
fn capture_and_spool_sections_match_their_definitions() {
    let schema = committed_schema();
    let section = |name: &str| {
        let mut sub = schema["$defs"][name].clone();
        // Its references point into the whole schema's definitions.
        sub["$defs"] = schema["$defs"].clone();
        jsonschema::validator_for(&sub).unwrap()
    };
    let capture = section("CaptureSummary");
    let ok = json!({
        "backend": "pcap", "buffer_bytes": 1048576, "promisc": true, "user": null,
        "received_pkts": 3, "dropped_pkts": 0, "if_dropped_pkts": 1, "unread_pkts": 0,
        "interfaces": [{"interface": "lo", "received_pkts": 3, "dropped_pkts": 0, "if_dropped_pkts": 1, "unread_pkts": 0}]
    });
    assert_eq!(errors(&capture, &ok), "");
    let mut extra = ok.clone();
    extra["interfaces"][0]["vlan"] = json!(7);
    assert_ne!(errors(&capture, &extra), "", "an unknown field in an interface is refused");
    let spool = section("SpoolSummary");
    let ok = json!({
        "chunks": 0, "bytes": 0, "over_quota_chunks": 0, "failed_chunks": 0,
        "locations": [{"path": "/d", "used_bytes": 0, "quota_bytes": null, "chunks_written": 0}],
        "leftovers": [], "last_chunk_in_output_dir": false
    });
    assert_eq!(errors(&spool, &ok), "");
    let mut missing = ok.clone();
    missing.as_object_mut().unwrap().remove("failed_chunks");
    assert_ne!(errors(&spool, &missing), "", "a missing field is refused");
}

/// A field the schema does not list fails validation, at the top level and inside a section:
/// a field added to the types without regenerating the schema fails the binary's tests.
#[test]
fn unknown_fields_are_refused() {
    let v = validator();
    let mut instance: Value = serde_json::from_str(&summary().to_json()).unwrap();
    assert_eq!(errors(&v, &instance), "");
    instance["new_counter"] = json!(1);
    assert_ne!(errors(&v, &instance), "");
    let mut instance: Value = serde_json::from_str(&summary().to_json()).unwrap();
    instance["packets"]["new_counter"] = json!(1);
    assert_ne!(errors(&v, &instance), "");
    let mut instance: Value = serde_json::from_str(&summary().to_json()).unwrap();
    instance["protocols"]["tcp"]["new_counter"] = json!(1);
    assert_ne!(errors(&v, &instance), "");
}
