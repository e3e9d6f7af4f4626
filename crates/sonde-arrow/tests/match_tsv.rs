//! The typed flow tables hold what the TSV logs say, row for row and cell for cell, on real
//! traces: every number the same (times and spans in ns where the TSV has ms), null exactly
//! where the TSV has `-` or a metric's sample-less `0`, and the same rows in the same order
//! whatever the number of workers.

use std::path::{Path, PathBuf};

use sonde_arrow::arrow::array::{Array, AsArray};
use sonde_arrow::arrow::datatypes::{DataType, DurationNanosecondType, TimestampNanosecondType, UInt64Type};
use sonde_arrow::arrow::record_batch::RecordBatch;
use sonde_arrow::{ArrowSink, FlowBatches, FlowTables};
use sonde_engine::{Part, Pipeline, Run};
use sonde_output::{FlowLines, Format, LineSink};

fn shared() -> Option<PathBuf> {
    let dir = std::env::var_os("SONDE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    dir.is_dir().then_some(dir)
}

fn traces() -> Vec<PathBuf> {
    let mut traces = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")];
    match shared() {
        Some(s) => traces.extend(
            [
                "groundtruth/mixed.pcap",
                "groundtruth/ipv6.pcap",
                "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
                "traces/realistic/nfstream+nfstream/tests/pcaps/bittorrent.pcap",
                // Pings and port unreachables (the golden ICMP case), ICMPv6 neighbour discovery.
                "traces/realistic/appneta+tcpreplay/test/test.pcap",
                "traces/realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
            ]
            .map(|t| s.join(t))
            .into_iter()
            .filter(|p| p.is_file()),
        ),
        None => eprintln!("SKIPPED the shared traces: ../shared is absent"),
    }
    traces
}

fn typed(trace: &Path, workers: usize) -> FlowTables {
    let run = Run::new().pipeline(Pipeline { workers, ..Pipeline::default() });
    let result = run.analyze_file(trace, &ArrowSink::new).unwrap();
    let mut all = FlowBatches::default();
    for part in result.flows {
        all.absorb(part);
    }
    all.into_tables().unwrap()
}

fn tsv(trace: &Path) -> [String; 3] {
    let result = Run::new().analyze_file(trace, &|| LineSink::new(Format::Tsv)).unwrap();
    let parts: Vec<&FlowLines> = result.flows.iter().collect();
    let [tcp, udp] = FlowLines::render(Format::Tsv, &parts).unwrap().map(|(_, text)| String::from_utf8(text).unwrap());
    let (_, icmp) = FlowLines::render_icmp(Format::Tsv, &parts).unwrap();
    [tcp, udp, String::from_utf8(icmp).unwrap()]
}

/// The TSV's text for `ns`: milliseconds with 3 decimals, rounded half up.
fn ms(ns: i64) -> String {
    let us = (ns + 500) / 1000;
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// Checks every cell of `table` against `text`; returns how many were null.
fn check(trace: &Path, table: &RecordBatch, text: &str) -> usize {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let schema = table.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, header, "{}", trace.display());
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
    assert_eq!(table.num_rows(), rows.len(), "{}", trace.display());
    let mut nulls = 0;
    for (c, name) in header.iter().enumerate() {
        let column = table.column(c);
        for (r, row) in rows.iter().enumerate() {
            let want = row[c];
            let at = || format!("{}: row {r} {name}", trace.display());
            if column.is_null(r) {
                nulls += 1;
                assert!(["-", "0", "0.000"].contains(&want), "{}: null where the TSV has {want}", at());
                continue;
            }
            let got = match column.data_type() {
                DataType::UInt64 => column.as_primitive::<UInt64Type>().value(r).to_string(),
                DataType::Boolean => (column.as_boolean().value(r) as u8).to_string(),
                DataType::Timestamp(..) => ms(column.as_primitive::<TimestampNanosecondType>().value(r)),
                DataType::Duration(_) => ms(column.as_primitive::<DurationNanosecondType>().value(r)),
                DataType::Dictionary(..) => {
                    let dict = column.as_dictionary::<sonde_arrow::arrow::datatypes::Int32Type>();
                    let values = dict.values().as_string::<i32>();
                    values.value(dict.keys().value(r) as usize).to_string()
                }
                other => panic!("{}: unexpected type {other}", at()),
            };
            assert_eq!(got, want, "{}", at());
        }
    }
    nulls
}

#[test]
fn typed_tables_hold_what_the_tsv_says() {
    let mut cells = 0;
    let mut nulls = 0;
    let mut icmp_rows = 0;
    for trace in traces() {
        let tables = typed(&trace, 1);
        let [tcp, udp, icmp] = tsv(&trace);
        nulls += check(&trace, &tables.tcp, &tcp);
        nulls += check(&trace, &tables.udp, &udp);
        check(&trace, &tables.icmp, &icmp);
        icmp_rows += tables.icmp.num_rows();
        cells += tables.tcp.num_rows() * tables.tcp.num_columns() + tables.udp.num_rows() * tables.udp.num_columns();
    }
    // Flows without RTT samples, without a tunnel, one-sided UDP: nulls there must be.
    assert!(nulls > 100 && nulls < cells / 2, "{nulls} nulls in {cells} cells");
    if shared().is_some() {
        assert!(icmp_rows >= 20, "only {icmp_rows} ICMP rows compared");
    }
}

#[test]
fn the_order_does_not_depend_on_the_workers() {
    for trace in traces() {
        let (one, three) = (typed(&trace, 1), typed(&trace, 3));
        assert_eq!(one.tcp, three.tcp, "{}", trace.display());
        assert_eq!(one.udp, three.udp, "{}", trace.display());
        assert_eq!(one.icmp, three.icmp, "{}", trace.display());
    }
}

#[test]
fn a_stream_hands_every_flow_over_in_batches() {
    let trace = &traces()[0];
    let (tx, rx) = std::sync::mpsc::sync_channel::<sonde_arrow::FlowBatch>(4);
    let reader = std::thread::spawn(move || {
        let mut rows = [0, 0];
        let mut batches = 0;
        for b in rx {
            assert!(b.batch.num_rows() <= 7);
            rows[b.protocol as usize] += b.batch.num_rows();
            batches += 1;
        }
        (rows, batches)
    });
    let run = Run::new().pipeline(Pipeline { workers: 2, ..Pipeline::default() });
    let result = run.analyze_file(trace, &|| sonde_arrow::StreamSink::new(tx.clone(), 7)).unwrap();
    assert!(result.flows.iter().all(Part::is_empty));
    drop(tx);
    let (rows, batches) = reader.join().unwrap();
    let all = typed(trace, 1);
    assert_eq!(rows, [all.tcp.num_rows(), all.udp.num_rows()]);
    assert!(batches > 2, "{batches}");
}
