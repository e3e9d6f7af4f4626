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
