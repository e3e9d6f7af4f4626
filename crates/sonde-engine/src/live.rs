//! What a live run asks of the analysis while it goes: every `every_ns` of packet time the
//! workers hand over what their sinks gathered, and the reader what it counted; between
//! packets, an operator's changes to the flow definitions are applied at the packet they reach.

use sonde_define::{Change, ChangeError, Counter};
use sonde_flow::FlowRecord;
use sonde_stats::PacketIntervals;

use crate::stats::RunStats;

/// Drains a worker's sink: takes what it gathered and sends it on, with the records of flows
/// still open in that worker and the drain's number.
pub type DrainSink<'a, S> = &'a (dyn Fn(&mut S, Vec<FlowRecord>, u64) + Sync);

/// A live run's side of the pipeline.
pub struct Live<'a, S> {
    /// Packet time between two drains.
    pub every_ns: u64,
    /// Takes what a worker's sink gathered since the last drain and sends it on with the
    /// drain's sequence number. Runs in that worker's thread, after every packet before the
    /// drain and none after.
    pub drain_sink: DrainSink<'a, S>,
    /// Open flows each worker shows at a drain, at most.
    pub open_flows: usize,
    pub hooks: &'a mut dyn LiveHooks,
}

/// The reader's side of a live run, called in the reader's thread.
pub trait LiveHooks {
    /// A drain: the workers have been asked for their parts of drain `point.seq`.
    fn drained(&mut self, point: DrainPoint<'_>);
    /// An operator's change waiting to be applied, if any (asked at every drain and tick).
    fn next_edit(&mut self) -> Option<Edit>;
    /// New internal networks to tell directions by from the next packet (asked at every drain).
    fn next_internal_nets(&mut self) -> Option<Vec<ipnet::IpNet>> {
        None
    }
}

/// Where the run is at a drain.
pub struct DrainPoint<'a> {
    /// 0, 1, 2… in the order of the drains; the workers' parts carry the same number.
    pub seq: u64,
    /// Packet time (the latest packet's, or a tick's).
    pub clock_ns: u64,
    pub stats: &'a RunStats,
    /// The packet statistics: take what closed since the last drain.
    pub intervals: Option<&'a mut PacketIntervals>,
    /// The definitions' counts so far (with several workers, up to the packets the workers
    /// have answered for).
    pub definitions: Option<&'a Counter>,
}

/// A change to the definitions made against version `expected_version` (`None`: whatever the
/// set is at, as a reload of the definitions file is); `reply` hears the new version or why it
/// was refused.
pub struct Edit {
    pub expected_version: Option<u64>,
    pub change: Change,
    pub reply: Box<dyn FnOnce(Result<u64, ChangeError>) + Send>,
}
