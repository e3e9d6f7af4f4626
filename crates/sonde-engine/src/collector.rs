//! A live run's collector thread: it joins the parts of each drain (every worker's, then the
//! reader's), keeps what they bring for the run's outputs ([`Held`]) and hands each whole drain
//! to the observers.

use std::collections::BTreeMap;

use crossbeam_channel::Receiver;
use sonde_flow::FlowRecord;
use sonde_stats::{FineBin, FlowInterval, PacketInterval};

use crate::sink::{DefinitionsView, Drain, DrainObserver, Held, Part, ReaderStatus};

/// What reaches the collector.
pub(crate) enum ToCollector<P> {
    Worker(WorkerPart<P>),
    Reader(ReaderPart),
}

/// A worker's part of a drain.
pub(crate) struct WorkerPart<P> {
    pub reader: usize,
    pub seq: u64,
    pub part: P,
    pub flows: Option<BTreeMap<u64, FlowInterval>>,
    pub open: Vec<FlowRecord>,
    pub ended: Vec<FlowRecord>,
    /// Flows opened since the worker's last drain, by protocol (TCP, UDP) and direction.
    pub opened: [[u64; 4]; 2],
}

/// The reader's part of a drain.
pub(crate) struct ReaderPart {
    pub reader: usize,
    pub seq: u64,
    pub clock_ns: u64,
    pub status: ReaderStatus,
    pub closed: Vec<PacketInterval>,
    pub fine: Vec<FineBin>,
    pub definitions: Option<DefinitionsView>,
}

/// The parts of a drain received so far.
#[derive(Default)]
struct Pending {
    workers: usize,
    reader: Option<ReaderPart>,
    open: Vec<FlowRecord>,
    ended: Vec<FlowRecord>,
}

/// Runs until every sender is gone; returns what the drains brought and no observer took.
pub(crate) fn collect<P: Part>(
    parts: Receiver<ToCollector<P>>,
    workers_per_reader: usize,
    mut held: Held<P>,
    observers: &mut [&mut (dyn DrainObserver<P> + Send)],
) -> Held<P> {
    let mut pending: BTreeMap<(usize, u64), Pending> = BTreeMap::new();
    held.keep_new_flows = observers.iter().any(|o| o.wants_new_flows());
    while let Ok(message) = parts.recv() {
        let reader = match message {
            ToCollector::Worker(w) => {
                let entry = pending.entry((w.reader, w.seq)).or_default();
                entry.workers += 1;
                entry.open.extend(w.open);
                entry.ended.extend(w.ended);
                held.absorb(w.part, w.flows);
                for (sum, n) in held.opened.iter_mut().flatten().zip(w.opened.iter().flatten()) {
                    *sum += n;
                }
                w.reader
            }
            ToCollector::Reader(r) => {
                let key = (r.reader, r.seq);
                pending.entry(key).or_default().reader = Some(r);
                key.0
            }
        };
        // A reader's drains complete in order.
        while let Some((&key, entry)) = pending.range((reader, 0)..=(reader, u64::MAX)).next() {
            if entry.workers < workers_per_reader || entry.reader.is_none() {
                break;
            }
            let done = pending.remove(&key).expect("just seen");
            let r = done.reader.expect("checked");
            held.new_packets = r.closed.len();
            held.packets.extend(r.closed);
            let drain = Drain {
                reader: r.reader,
                seq: r.seq,
                clock_ns: r.clock_ns,
                status: r.status,
                fine: r.fine,
                open: done.open,
                ended: done.ended,
                definitions: r.definitions,
            };
            for observer in observers.iter_mut() {
                observer.drained(&drain, &mut held);
            }
            held.new_packets = 0;
            held.new_flows.clear();
        }
    }
    held
}
