//! `--format parquet` and `--format arrow`: every output of a run with intervals, tables and
//! definitions is written typed, reads back with the arrow-rs readers, and holds the TSV run's
//! rows value for value.

mod common;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use common::*;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sonde_arrow::arrow::array::{Array, AsArray, RecordBatch};
use sonde_arrow::arrow::compute::concat_batches;
use sonde_arrow::arrow::datatypes::{
    DataType, DurationNanosecondType, Field, Float64Type, Int32Type, TimeUnit, TimestampMicrosecondType,
    TimestampNanosecondType, UInt64Type,
};
use sonde_arrow::arrow::ipc::reader::FileReader;
use sonde_types::time::parse_seconds;

const DEFS: &str = "src = ip.version == 4 key ip4.src measure count,gap,length\n\
                    port = ip.proto == 6 key tcp.dport\n";

fn traces() -> Vec<PathBuf> {
    let mut traces = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")];
    if let Some(shared) = shared_dir() {
        traces.push(shared.join("groundtruth/mixed.pcap"));
    }
    traces
}

fn read(path: &Path) -> RecordBatch {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // The file's schema, with its metadata (the Parquet reader's batches come without it).
    let (schema, batches): (_, Vec<RecordBatch>) = if path.extension().is_some_and(|e| e == "parquet") {
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        (builder.schema().clone(), builder.build().unwrap().map(Result::unwrap).collect())
    } else {
        let reader = FileReader::try_new(file, None).unwrap();
        (reader.schema(), reader.map(Result::unwrap).collect())
    };
    concat_batches(&schema, &batches).unwrap()
}

/// Does the typed cell say what the TSV's text says? Times and spans are compared in ns (flow
/// logs' ms, intervals' s); a null is `-` or a sample-less zero. Parquet's times are floored to
/// the µs and its spans are float ms (`unit` = `ms` in the field's metadata).
fn same(field: &Field, column: &dyn Array, row: usize, text: &str, flow_log: bool) -> bool {
    if column.is_null(row) {
        return ["-", "0", "0.000"].contains(&text);
    }
    // Flow logs print ms with 3 decimals (µs, rounded half up); the other outputs s or ms with
    // up to 9 decimals (exact ns).
    let us_of_ms =
        || text.split_once('.').filter(|(_, f)| f.len() == 3).and_then(|_| text.replace('.', "").parse::<u64>().ok());
    let text_ns = |ns: u64, unit_ns: u64| {
        if flow_log {
            us_of_ms() == Some(ns.div_euclid(1000) + u64::from(ns % 1000 >= 500))
        } else {
            parse_seconds(text).map(|v| v / (1_000_000_000 / unit_ns)) == Some(ns)
        }
    };
    let span = field.metadata().get("unit").is_some_and(|u| u == "ms");
    match column.data_type() {
        DataType::UInt64 => text.parse() == Ok(column.as_primitive::<UInt64Type>().value(row)),
        // A span in Parquet: float ms, exact to the ns.
        DataType::Float64 if span => {
            let ms = column.as_primitive::<Float64Type>().value(row);
            text_ns((ms * 1e6).round() as u64, 1_000_000)
        }
        DataType::Float64 => text.parse() == Ok(column.as_primitive::<Float64Type>().value(row)),
        DataType::Boolean => text == if column.as_boolean().value(row) { "1" } else { "0" },
        DataType::Timestamp(TimeUnit::Nanosecond, Some(tz)) if tz.as_ref() == "UTC" => {
            text_ns(column.as_primitive::<TimestampNanosecondType>().value(row) as u64, 1_000_000_000)
        }
        // A time in Parquet: the ns floored to the µs; the flow logs' text rounds them.
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC" => {
            let us = column.as_primitive::<TimestampMicrosecondType>().value(row) as u64;
            if flow_log {
                us_of_ms().is_some_and(|t| t == us || t == us + 1)
            } else {
                parse_seconds(text).map(|ns| ns / 1000) == Some(us)
            }
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            text_ns(column.as_primitive::<DurationNanosecondType>().value(row) as u64, 1_000_000)
        }
        DataType::Dictionary(..) => {
            let dict = column.as_dictionary::<Int32Type>();
            dict.values().as_string::<i32>().value(dict.keys().value(row) as usize) == text
        }
        // Arrow IPC files: the file format cannot change a dictionary between batches.
        DataType::Utf8 => column.as_string::<i32>().value(row) == text,
        other => panic!("unexpected type {other}"),
    }
}

/// The Parquet file's table is the Arrow file's in its Parquet form: each time's ns floored to
/// the µs, each span's ns as float ms (exact), everything else equal.
fn parquet_is_arrow_in_parquet_form(parquet: &RecordBatch, arrow: &RecordBatch, name: &str) {
    assert_eq!(parquet.num_rows(), arrow.num_rows(), "{name}");
    for (i, field) in arrow.schema().fields().iter().enumerate() {
        let (p, a) = (parquet.column(i), arrow.column(i));
        let pf = parquet.schema().field(i).clone();
        let nulls = |c: &dyn Array| (0..c.len()).map(|r| c.is_null(r)).collect::<Vec<_>>();
        assert_eq!(nulls(p.as_ref()), nulls(a.as_ref()), "{name} {}", field.name());
        match field.data_type() {
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
                assert_eq!(pf.data_type(), &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()));
                let (p, a) =
                    (p.as_primitive::<TimestampMicrosecondType>(), a.as_primitive::<TimestampNanosecondType>());
                for r in (0..a.len()).filter(|&r| a.is_valid(r)) {
                    assert_eq!(p.value(r), a.value(r).div_euclid(1000), "{name} {} row {r}", field.name());
                }
            }
            DataType::Duration(TimeUnit::Nanosecond) => {
                assert_eq!(
                    (pf.data_type(), pf.metadata().get("unit").map(String::as_str)),
                    (&DataType::Float64, Some("ms"))
                );
                let (p, a) = (p.as_primitive::<Float64Type>(), a.as_primitive::<DurationNanosecondType>());
                for r in (0..a.len()).filter(|&r| a.is_valid(r)) {
                    assert_eq!((p.value(r) * 1e6).round() as i64, a.value(r), "{name} {} row {r}", field.name());
                }
            }
            _ => assert_eq!(pf.name(), field.name()),
        }
    }
}

fn compare(typed: &RecordBatch, tsv: &Path) -> usize {
    let text = std::fs::read_to_string(tsv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let schema = typed.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, header, "{}", tsv.display());
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
    assert_eq!(typed.num_rows(), rows.len(), "{}", tsv.display());
    let flow_log =
        ["tcp_flows.tsv", "udp_flows.tsv", "icmp_flows.tsv"].contains(&tsv.file_name().unwrap().to_str().unwrap());
    for (c, name) in header.iter().enumerate() {
        for (r, row) in rows.iter().enumerate() {
            assert!(
                same(schema.field(c), typed.column(c).as_ref(), r, row[c], flow_log),
                "{} row {r} {name}: TSV {:?}, typed {:?}",
                tsv.display(),
                row[c],
                typed.column(c).slice(r, 1)
            );
        }
    }
    rows.len() * header.len()
}

#[test]
fn every_output_is_written_typed_with_the_tsv_values() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::write(&defs, DEFS).unwrap();
    let args = ["--interval", "1", "--tables", "--definitions", defs.to_str().unwrap()];
    for trace in traces() {
        let (tsv, o) = analyze(&trace, &args);
        assert!(o.status.success(), "{o:?}");
        let tsv_files: Vec<String> = std::fs::read_dir(tsv.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tsv"))
            .collect();
        assert!(tsv_files.len() >= 13, "{tsv_files:?}");
        let mut dirs = Vec::new();
        for format in ["parquet", "arrow"] {
            let typed_args: Vec<&str> = args.iter().copied().chain(["--format", format]).collect();
            let (typed, o) = analyze(&trace, &typed_args);
            assert!(o.status.success(), "{o:?}");
            let mut cells = 0;
            for name in &tsv_files {
                let stem = name.trim_end_matches(".tsv");
                let path = typed.path().join(format!("{stem}.{format}"));
                let table = read(&path);
                assert_eq!(table.schema().metadata()["sonde.output"], stem);
                cells += compare(&table, &tsv.path().join(name));
            }
            // Only typed files and the summary (beside the directory's lock); the summary lists them.
            let written: Vec<String> = std::fs::read_dir(typed.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".sonde.lock")
                .collect();
            assert_eq!(written.len(), tsv_files.len() + 1, "{written:?}");
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(typed.path().join("summary.json")).unwrap()).unwrap();
            let mut listed: Vec<String> =
                summary["outputs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
            let mut want = written.clone();
            listed.sort();
            want.sort();
            assert_eq!(listed, want);
            assert!(cells > 1000, "{}: {cells}", trace.display());
            dirs.push(typed);
        }
        for name in &tsv_files {
            let stem = name.trim_end_matches(".tsv");
            let parquet = read(&dirs[0].path().join(format!("{stem}.parquet")));
            let arrow = read(&dirs[1].path().join(format!("{stem}.arrow")));
            parquet_is_arrow_in_parquet_form(&parquet, &arrow, stem);
        }
    }
}

#[test]
fn flow_logs_carry_types_nulls_and_definitions() {
    let trace = &traces()[0];
    let (out, o) = analyze(trace, &["--format", "parquet"]);
    assert!(o.status.success(), "{o:?}");
    let tcp = read(&out.path().join("tcp_flows.parquet"));
    let schema = tcp.schema();
    let types: HashMap<&str, &DataType> = schema.fields().iter().map(|f| (f.name().as_str(), f.data_type())).collect();
    // Parquet's form: times in µs, spans float ms with their unit (docs/typed-outputs.md).
    assert_eq!(types["first"], &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
    assert_eq!(types["c_rtt_avg"], &DataType::Float64);
    assert_eq!(schema.field_with_name("c_rtt_avg").unwrap().metadata()["unit"], "ms");
    assert_eq!(types["complete"], &DataType::Boolean);
    assert_eq!(types["c_pkts_all"], &DataType::UInt64);
    assert!(matches!(types["c_ip"], DataType::Dictionary(..)));
    let rtt = schema.field_with_name("c_rtt_avg").unwrap().metadata();
    assert!(rtt["description"].starts_with("data→ACK round trip"), "{rtt:?}");
    assert_eq!(schema.metadata()["sonde.version"], env!("CARGO_PKG_VERSION"));
    // The tunnel column is null for every flow of the demo (no tunnel), never "-".
    assert_eq!(tcp.column_by_name("tunnel").unwrap().null_count(), tcp.num_rows());
}

#[test]
fn http_and_spool_refuse_typed_formats() {
    let trace = &traces()[0];
    let (_, o) = analyze(trace, &["--format", "arrow", "--http", "127.0.0.1:0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--http serves the flow logs as text"), "{o:?}");
}

/// A pcapng of three TCP SYNs, the middle one timed past anything a capture has (a garbage
/// 64-bit µs timestamp: year 584,000 when read as µs, past `u64` nanoseconds).
fn pcapng_with_a_garbage_time(path: &Path) {
    fn block(kind: u32, mut body: Vec<u8>) -> Vec<u8> {
        body.resize(body.len().next_multiple_of(4), 0);
        let len = (12 + body.len()) as u32;
        [&kind.to_le_bytes()[..], &len.to_le_bytes(), &body, &len.to_le_bytes()].concat()
    }
    let syn = |ts_us: u64, port: u16| {
        let mut frame = vec![0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00];
        frame.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        frame.extend_from_slice(&port.to_be_bytes());
        frame.extend_from_slice(&[0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x03, 0xe8, 0, 0, 0, 0]);
        let mut body = [0u32, (ts_us >> 32) as u32, ts_us as u32, 54, 54].map(u32::to_le_bytes).concat();
        body.extend_from_slice(&frame);
        block(6, body)
    };
    let shb = block(0x0A0D_0D0A, [&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &(-1i64).to_le_bytes()].concat());
    let idb = block(1, [&1u16.to_le_bytes()[..], &[0, 0], &65535u32.to_le_bytes()].concat());
    let t0 = 1_700_000_000_000_000;
    let trace = [shb, idb, syn(t0, 1000), syn(u64::MAX - 15, 1001), syn(t0 + 1000, 1002)].concat();
    std::fs::write(path, trace).unwrap();
}

/// Issue 38: a packet timed past 2260 is analysed at the end of 2260 and counted
/// (`time_out_of_range`), and every format writes every output as usual. Before, the typed
/// formats failed on the interval table and said so naming `intervals.tsv`. (Refusing such
/// packets instead would lose whole real captures: nfstream's `dhcp_*_endian.pcapng` are timed
/// in the year 152,000, and `tests/corpus.rs` holds their flows to Wireshark's.)
#[test]
fn a_garbage_timestamp_is_analysed_at_the_end_of_2260_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("garbage-time.pcapng");
    pcapng_with_a_garbage_time(&trace);
    for format in ["tsv", "parquet", "arrow"] {
        let out = dir.path().join(format);
        let run = sonde()
            .args(["analyze", "-q", "--force", "--format", format, "-r"])
            .arg(&trace)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{format}: {stderr}");
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        let p = &summary["packets"];
        assert_eq!((p["read"].as_u64(), p["analysed"].as_u64()), (Some(3), Some(3)), "{format}");
        assert_eq!(p["time_out_of_range"], 1, "{format}");
        // From the first packet to the last nanosecond of 2260.
        let span = summary["trace_duration_s"].as_f64().unwrap();
        assert!((span - (9_183_110_400.0 - 1_700_000_000.0)).abs() < 1.0, "{format}: {span}");
        assert!(summary.get("output_errors").is_none(), "{format}: {}", summary["output_errors"]);
        assert_eq!(summary["flows"]["tcp"], 3, "{format}");
        let ext = if format == "tsv" { "tsv" } else { format };
        for stem in ["tcp_flows", "udp_flows", "icmp_flows", "intervals", "quantiles", "histograms"] {
            assert!(out.join(format!("{stem}.{ext}")).is_file(), "{format}: {stem}.{ext} missing");
        }
    }
}
