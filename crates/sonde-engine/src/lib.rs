//! sonde-engine: the pipeline that joins source, filter, decoder and flow tracker.
//!
//! [`analyze`] pulls frames from a [`PacketSource`], drops those the BPF [`Filter`] rejects,
//! decodes the rest with [`sonde_wire::decode`], feeds them to a [`FlowTracker`] and pushes
//! finished flows into a [`FlowSink`], counting everything it sees in [`RunStats`]. A damaged
//! input ends the read but not the run: every flow analysed so far is still emitted and the
//! error is returned beside the stats. Packet time drives the tracker, so results do not
//! depend on the machine or on how fast it runs.
//!
//! ```
//! use sonde_engine::{analyze, Progress};
//! use sonde_flow::{FlowConfig, FlowRecord};
//! let mut source = sonde_capture::open_bytes(vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0,
//!     0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]).unwrap();
//! let mut flows: Vec<FlowRecord> = Vec::new();
//! let outcome = analyze(source.as_mut(), None, FlowConfig::default(), &mut flows, &mut |_: Progress| {});
//! assert_eq!(outcome.stats.packets.read, 0);
//! assert!(outcome.input_error.is_none());
//! ```

pub mod resources;
mod stats;

pub use sonde_filter::{Filter, FilterError};
pub use stats::*;

use sonde_capture::{CaptureError, PacketSource};
use sonde_flow::{FlowConfig, FlowSink, FlowTracker};
use sonde_wire::LinkType;

/// How far the run has got, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub packets: u64,
    /// Bytes of the input consumed, and the input size when known.
    pub position: u64,
    pub size: Option<u64>,
}

/// Frames between progress callbacks.
const PROGRESS_EVERY: u64 = 1 << 16;

/// The result of a run: what was counted, and the error that ended the input early, if any.
#[derive(Debug)]
pub struct Outcome {
    pub stats: RunStats,
    pub input_error: Option<CaptureError>,
}

/// Runs the whole analysis of one input.
pub fn analyze<S: FlowSink>(
    source: &mut dyn PacketSource,
    mut filter: Option<&mut Filter>,
    flow_cfg: FlowConfig,
    sink: &mut S,
    progress: &mut dyn FnMut(Progress),
) -> Outcome {
    let mut tracker = FlowTracker::new(flow_cfg);
    let mut stats = RunStats::default();
    let mut counting = CountingSink { inner: sink, counts: Default::default() };
    let size = source.size_hint();
    let input_error = loop {
        if stats.packets.read % PROGRESS_EVERY == 0 && stats.packets.read > 0 {
            progress(Progress { packets: stats.packets.read, position: source.position(), size });
        }
        let frame = match source.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break None,
            Err(e) => break Some(e),
        };
        stats.count_frame(frame.link_type, frame.data.len(), frame.wire_len, frame.ts_ns);
        if let Some(f) = filter.as_deref_mut() {
            if !f.matches(frame.link_type, frame.data, frame.wire_len) {
                stats.packets.filtered_out += 1;
                continue;
            }
        }
        let summary = match sonde_wire::decode(LinkType(frame.link_type), frame.data, frame.wire_len) {
            Ok(s) => s,
            Err(unsupported) => {
                stats.count_unsupported(unsupported.0 .0);
                continue;
            }
        };
        stats.packets.analysed += 1;
        stats.count_packet(&summary, frame.wire_len);
        // A timestamp that steps back only delays timers: expiry never runs backwards.
        tracker.on_packet(frame.ts_ns, &summary, &mut counting);
    };
    tracker.finish(&mut counting);
    stats.flows = counting.counts;
    stats.finish();
    stats.set_table(tracker.table_stats());
    Outcome { stats, input_error }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonde_flow::FlowRecord;

    /// A little-endian µs pcap of `link_type` holding `frames` at 1 s intervals.
    fn pcap(link_type: u32, frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0];
        out.extend_from_slice(&link_type.to_le_bytes());
        for (i, f) in frames.iter().enumerate() {
            for v in [1_700_000_000 + i as u32, 0, f.len() as u32, f.len() as u32] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(f);
        }
        out
    }

    /// Raw IPv4 + UDP 10.0.0.1:5000 → 10.0.0.2:`dport` with 4 payload bytes.
    fn udp(dport: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        p.extend_from_slice(&5000u16.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
        p
    }

    fn run(bytes: Vec<u8>, filter: Option<&str>) -> (Outcome, Vec<FlowRecord>) {
        let mut source = sonde_capture::open_bytes(bytes).unwrap();
        let mut filter = filter.map(|f| Filter::new(f).unwrap());
        let mut flows = Vec::new();
        let outcome = analyze(source.as_mut(), filter.as_mut(), FlowConfig::default(), &mut flows, &mut |_| {});
        (outcome, flows)
    }

    #[test]
    fn counts_flows_protocols_and_time() {
        let (outcome, flows) = run(pcap(101, &[udp(53), udp(53), udp(123)]), None);
        let s = &outcome.stats;
        assert_eq!(s.packets.read, 3);
        assert_eq!(s.protocols.udp, Traffic { packets: 3, bytes: 96 });
        assert_eq!(s.link_types["RAW(101)"].packets, 3);
        assert_eq!((s.flows.udp, s.flows.end_reasons["eof"]), (2, 2));
        assert_eq!(flows.len(), 2);
        assert!((s.trace_duration_s() - 2.0).abs() < 1e-9);
    }

    #[test]
    fn unsupported_link_types_are_counted_not_analysed() {
        let (outcome, flows) = run(pcap(147, &[udp(53)]), None);
        assert_eq!(outcome.stats.unsupported_link_types["LINKTYPE(147)"], 1);
        assert_eq!(outcome.stats.packets.analysed, 0);
        assert!(flows.is_empty());
    }

    #[test]
    fn the_filter_drops_frames_before_decoding() {
        let (outcome, flows) = run(pcap(101, &[udp(53), udp(123)]), Some("udp port 123"));
        assert_eq!(outcome.stats.packets.filtered_out, 1);
        assert_eq!(flows.len(), 1);
        assert_eq!(flows[0].endpoints().server_port, 123);
    }

    #[test]
    fn a_truncated_input_keeps_what_came_before() {
        let mut bytes = pcap(101, &[udp(53), udp(123)]);
        bytes.truncate(bytes.len() - 5);
        let (outcome, flows) = run(bytes, None);
        assert_eq!(outcome.stats.packets.read, 1);
        assert!(outcome.input_error.is_some());
        assert_eq!(flows.len(), 1);
    }
}
