//! Analyses a trace through the library and prints its flows, one line each.
//!
//! `cargo run -p sonde-engine --example flows -- testdata/demo.pcap [WORKERS]`

use sonde_engine::{Pipeline, Run};
use sonde_flow::FlowRecord;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: flows TRACE [WORKERS]")?;
    let workers = args.next().map_or(Ok(1), |w| w.parse())?;

    // Each worker keeps its flows' records as they end; the run hands them back.
    let run = Run::new().pipeline(Pipeline { workers, ..Pipeline::default() });
    let result = run.analyze_file(path.as_ref(), &Vec::<FlowRecord>::new)?;

    for flow in result.flows.iter().flatten() {
        let e = flow.endpoints();
        let proto = match flow {
            FlowRecord::Tcp(_) => "tcp",
            FlowRecord::Udp(_) => "udp",
        };
        println!(
            "{proto} {}:{} -> {}:{}  first {} ns",
            e.client_ip,
            e.client_port,
            e.server_ip,
            e.server_port,
            flow.first_ns()
        );
    }
    let s = &result.stats;
    eprintln!("{} packets, {} TCP and {} UDP flows", s.packets.read, s.flows.tcp, s.flows.udp);
    if let Some(e) = result.input_error {
        eprintln!("input ended early: {e}");
    }
    Ok(())
}
