//! sonde-engine: one analysis run, whole — the library a CLI, an HTTP server or a Python
//! binding drives.
//!
//! A [`Run`] reads one input (or several: the sockets of a PACKET_FANOUT group) with a reader
//! per input — it pulls frames from a [`PacketSource`](sonde_capture::PacketSource), drops those
//! the BPF [`Filter`] rejects, decodes the rest with [`sonde_wire::decode`], thins them
//! ([`sonde_thin`], optional) and counts everything in [`RunStats`] — feeding N workers, each
//! with its own [`FlowTracker`](sonde_flow::FlowTracker). Packets go to workers in batches by a
//! symmetric hash of their 5-tuple, so both directions of a flow meet in one worker and workers
//! share nothing per packet. Each packet carries the reader's clock (the latest timestamp of
//! the whole input), so a worker's flows end exactly as in a single tracker: the records are
//! the same for any number of workers. Finished flows go to each worker's [`WorkerSink`] as
//! they end; a live run's drains reach [`DrainObserver`]s whole and typed; the end returns a
//! [`RunResult`]. A damaged input ends the read but not the run: every flow analysed so far is
//! still emitted and the error is returned beside the stats.
//!
//! ```
//! use sonde_engine::Run;
//! use sonde_flow::FlowRecord;
//! let mut source = sonde_capture::open_bytes(vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0,
//!     0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]).unwrap();
//! let result = Run::new().analyze(&mut [source.as_mut()], &Vec::<FlowRecord>::new).unwrap();
//! assert_eq!(result.stats.packets.read, 0);
//! assert!(result.input_error.is_none());
//! ```

#![forbid(unsafe_code)]

mod app;
mod collector;
mod controls;
mod defined;
mod pipeline;
pub mod resources;
mod run;
pub mod settings;
mod sink;
mod stats;
mod thinning;

pub use app::{AppConfig, AppReaderStats, UDP_HEAD_BYTES};
pub use controls::{Controls, Edit};
pub use pipeline::{Outcome, Pipeline, Progress, MAX_WORKERS};
pub use run::{Drains, PartOf, Run, RunError, RunResult, Timing};
pub use sink::{DefinitionsView, Drain, DrainObserver, Held, Part, ReaderStatus, Sinks, Totals, Undrained, WorkerSink};
pub use sonde_filter::{Filter, FilterError};
pub use sonde_thin::{Config as ThinConfig, Thinner};
pub use stats::*;
pub use thinning::*;

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

    fn run(bytes: Vec<u8>, filter: Option<&str>) -> (RunResult<Vec<FlowRecord>>, Vec<FlowRecord>) {
        let mut source = sonde_capture::open_bytes(bytes).unwrap();
        let result = Run::new().filter(filter.map(str::to_string)).analyze(&mut [source.as_mut()], &Vec::new).unwrap();
        let flows = result.flows.concat();
        (result, flows)
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

    /// A live source in miniature: raw IPv4 frames at given times, then ticks.
    struct Live {
        frames: Vec<(u64, Vec<u8>)>,
        ticks_ns: Vec<u64>,
        next: usize,
    }

    impl sonde_capture::PacketSource for Live {
        fn next_frame(&mut self) -> Result<Option<sonde_capture::Frame<'_>>, sonde_capture::CaptureError> {
            // Frames first, then one pause per tick, then the end.
            let i = self.next;
            self.next += 1;
            Ok(self.frames.get(i).map(|(ts_ns, data)| sonde_capture::Frame {
                ts_ns: *ts_ns,
                wire_len: data.len() as u32,
                link_type: 101,
                data,
            }))
        }
        fn tick(&mut self) -> Option<u64> {
            let i = self.next - 1 - self.frames.len();
            self.ticks_ns.get(i).copied()
        }
        fn position(&self) -> u64 {
            0
        }
        fn size_hint(&self) -> Option<u64> {
            None
        }
        fn format(&self) -> &str {
            "live"
        }
    }

    #[test]
    fn a_tick_on_a_quiet_link_times_flows_out() {
        const S: u64 = 1_000_000_000;
        for workers in [1, 2] {
            let pipeline = Pipeline { workers, ..Pipeline::default() };
            let udp_idle_s = pipeline.flow.udp_idle_ns / S;
            let frames = vec![(1_700_000_000 * S, udp(53)), (1_700_000_000 * S, udp(123))];
            for (ticks_ns, reason) in [
                (vec![], "eof"),
                (vec![(1_700_000_000 + udp_idle_s - 1) * S], "eof"),
                (vec![(1_700_000_000 + udp_idle_s) * S], "idle"),
            ] {
                let mut source = Live { frames: frames.clone(), ticks_ns, next: 0 };
                let outcome =
                    Run::new().pipeline(pipeline.clone()).analyze(&mut [&mut source], &Vec::<FlowRecord>::new).unwrap();
                assert_eq!(outcome.stats.packets.read, 2);
                assert_eq!(outcome.stats.flows.end_reasons[reason], 2, "{workers} workers, {reason}");
            }
        }
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
