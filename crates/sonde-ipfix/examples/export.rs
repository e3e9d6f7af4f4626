//! Exports a trace's flows as IPFIX through the library: the engine's workers each get a pair
//! of sinks, one keeping the records and one queueing them for the exporter.
//!
//! `cargo run -p sonde-ipfix --example export -- testdata/demo.pcap udp://127.0.0.1:9995`

use sonde_engine::Run;
use sonde_flow::FlowRecord;
use sonde_ipfix::{EncoderConfig, Exporter, Target};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: export TRACE udp://HOST:PORT|tcp://HOST:PORT|FILE";
    let (path, target) = (args.next().ok_or(usage)?, args.next().ok_or(usage)?);

    let exporter = Exporter::start(&Target::parse(&target)?, EncoderConfig::default())?;
    let result = Run::new().analyze_file(path.as_ref(), &|| (Vec::<FlowRecord>::new(), exporter.sink()))?;
    // The run is over: every worker's sink is done, so finish sends all that was queued.
    let stats = exporter.finish();

    let flows: usize = result.flows.iter().map(Vec::len).sum();
    println!(
        "{flows} flows; {} records in {} messages ({} bytes) to {target}; {} dropped, {} failed",
        stats.records, stats.messages, stats.bytes, stats.dropped_records, stats.failed_records
    );
    Ok(())
}
