//! Interval contributions add up to the run's report, without a broker: a live run's drains
//! (a trace read with drains, as `sonde monitor -r` does) turned into contributions by
//! [`LiveIntervals`], summed per interval, give exactly the report's intervals.tsv rows and
//! distributions — with short idle timeouts, so that many flows end after their interval was
//! published — and so do `analyze`'s ([`Contributions::of_report`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sonde_engine::{Drain, DrainObserver, Drains, Held, Pipeline, Run, Undrained};
use sonde_flow::FlowRecord;
use sonde_kafka::{Contribution, Contributions, LiveIntervals};
use sonde_stats::{Dir, Dist, Metric, Net, Proto, Report};

const MS: u64 = 1_000_000;

/// A file of the shared corpus (`$SONDE_SHARED`, else `<repo>/../shared`), if present.
fn shared(rel: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SONDE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let path = dir.join(rel);
    if !path.is_file() {
        eprintln!("SKIPPED: no {} (set SONDE_SHARED)", path.display());
        return None;
    }
    Some(path)
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

/// What a run published: every contribution in order, and how many reached an interval
/// published before (a flow that ended after its interval closed).
#[derive(Default)]
struct Published {
    all: Vec<Contributions>,
    late: usize,
    released: Option<u64>,
}

struct Observer {
    live: LiveIntervals,
    published: Arc<Mutex<Published>>,
    /// For the test of the test: late flow statistics are not sent.
    drop_late: bool,
}

impl Observer {
    fn keep(&mut self, mut c: Contributions) {
        let mut p = self.published.lock().unwrap();
        let released = p.released;
        let late: Vec<u64> = c.parts.keys().copied().filter(|&i| released.is_some_and(|r| i <= r)).collect();
        p.late += late.len();
        if self.drop_late {
            for i in late {
                if let Some(part) = c.parts.get_mut(&i) {
                    (part.opened, part.closed, part.active) = Default::default();
                    part.dists.retain(|(m, ..), _| matches!(m, Metric::IpLen | Metric::IpTtl));
                }
            }
        }
        p.released = p.released.max(c.parts.keys().next_back().copied());
        p.all.push(c);
    }
}

impl DrainObserver<Vec<FlowRecord>> for Observer {
    fn drained(&mut self, drain: &Drain, held: &mut Held<Vec<FlowRecord>>) {
        let new = &held.packets[held.packets.len() - held.new_packets..];
        let c = self.live.drained(drain.reader, drain.clock_ns, new, &[&held.new_flows]);
        self.keep(c);
    }
    fn wants_new_flows(&self) -> bool {
        true
    }
    fn finished(&mut self, rest: &Undrained<'_>) {
        let c = self.live.finished(rest.packets, &rest.flows);
        self.keep(c);
    }
}

/// Contributions summed per interval.
fn sum(all: &[Contributions]) -> BTreeMap<u64, Contribution> {
    let mut total: BTreeMap<u64, Contribution> = BTreeMap::new();
    for c in all {
        for (&i, part) in &c.parts {
            let t = total.entry(i).or_default();
            for (a, b) in t.packets.iter_mut().flatten().zip(part.packets.iter().flatten()) {
                *a += b;
            }
            for (a, b) in t.bytes.iter_mut().flatten().zip(part.bytes.iter().flatten()) {
                *a += b;
            }
            for (mine, theirs) in
                [(&mut t.opened, &part.opened), (&mut t.closed, &part.closed), (&mut t.active, &part.active)]
            {
                for (a, b) in mine.iter_mut().flatten().zip(theirs.iter().flatten()) {
                    *a += b;
                }
            }
            for (k, d) in &part.dists {
                t.dists.entry(*k).or_insert_with(|| Dist::new(d.binning)).merge(d);
            }
        }
    }
    total
}

/// The report's rows (interval, proto, net) → [packets, bytes, opened, closed, active], and
/// its distributions.
fn report_rows(report: &Report) -> BTreeMap<(u64, &'static str, &'static str), [u64; 5]> {
    report
        .traffic_rows()
        .into_iter()
        .map(|(i, r)| {
            let proto = Proto::from_name(&r.proto).unwrap().name();
            let net = Net::from_name(&r.net).unwrap().name();
            ((i, proto, net), [r.packets, r.bytes, r.flows_opened, r.flows_closed, r.flows_active])
        })
        .collect()
}

fn summed_rows(total: &BTreeMap<u64, Contribution>) -> BTreeMap<(u64, &'static str, &'static str), [u64; 5]> {
    let mut rows = BTreeMap::new();
    for (&i, c) in total {
        for proto in Proto::ALL {
            for net in Net::ALL {
                let row = c.row(proto, net);
                if row.iter().any(|&v| v > 0) {
                    rows.insert((i, proto.name(), net.name()), row);
                }
            }
        }
    }
    rows
}

fn report_dists(report: &Report) -> BTreeMap<(u64, Metric, Dir, Net), Dist> {
    let mut all = BTreeMap::new();
    for (&i, interval) in &report.intervals {
        for ((m, d, n), dist) in interval.dists() {
            all.insert((i, m, d, n), dist.clone());
        }
    }
    all
}

fn summed_dists(total: &BTreeMap<u64, Contribution>) -> BTreeMap<(u64, Metric, Dir, Net), Dist> {
    total
        .iter()
        .flat_map(|(&i, c)| c.dists.iter().map(move |(&(m, d, n), dist)| ((i, m, d, n), dist.clone())))
        .collect()
}

/// Runs `trace` as a live run (drains every `drain_ms` of packet time, intervals of
/// `interval_ms`, idle timeouts of `idle_ms`); returns the report and what was published.
fn live_run(trace: &Path, interval_ms: u64, drain_ms: u64, idle_ms: u64, drop_late: bool) -> (Report, Published) {
    let cfg = sonde_stats::Config { interval_ns: interval_ms * MS, ..Default::default() };
    let mut pipeline = Pipeline { workers: 2, ..Pipeline::default() };
    pipeline.flow.tcp_idle_ns = idle_ms * MS;
    pipeline.flow.udp_idle_ns = idle_ms * MS;
    let drains = Drains { every_ns: drain_ms * MS, view: false, fine_bin_ns: MS, open_flows: 0, recent_flows: 0 };
    let run = Run::new().pipeline(pipeline).intervals(Some(cfg)).drains(Some(drains));
    let published = Arc::new(Mutex::new(Published::default()));
    let mut observer =
        Observer { live: LiveIntervals::new(interval_ms * MS, 1), published: published.clone(), drop_late };
    let mut source = sonde_capture::open(trace).expect("open the trace");
    let mut observers: [&mut (dyn DrainObserver<Vec<FlowRecord>> + Send); 1] = [&mut observer];
    let result =
        run.analyze_observed(&mut [source.as_mut()], &Vec::<FlowRecord>::new, &mut observers).expect("the run");
    drop(observer);
    let published = Arc::try_unwrap(published).ok().unwrap().into_inner().unwrap();
    (result.intervals.expect("intervals"), published)
}

fn check(trace: &Path, interval_ms: u64, drain_ms: u64, idle_ms: u64) {
    let (report, published) = live_run(trace, interval_ms, drain_ms, idle_ms, false);
    let name = trace.display();
    assert!(published.late > 0, "{name}: no flow ended after its interval was published: the test proves nothing");
    let total = sum(&published.all);
    let (want, got) = (report_rows(&report), summed_rows(&total));
    assert!(want.len() > 10, "{name}: {} rows", want.len());
    assert!(
        want.values().any(|r| r[4] > r[2] + r[3]),
        "{name}: no interval where flows are active without opening or closing"
    );
    for (key, row) in &want {
        assert_eq!(got.get(key), Some(row), "{name}: intervals.tsv row {key:?}");
    }
    assert_eq!(got.len(), want.len(), "{name}: rows the report does not have");
    let (want, got) = (report_dists(&report), summed_dists(&total));
    assert!(want.keys().any(|k| k.1 == Metric::TcpRttAvg), "{name}: no RTT distribution");
    assert_eq!(got, want, "{name}: the histograms");
    // analyze's: one contribution per interval, the report's.
    let whole = sum(&[Contributions::of_report(&report)]);
    assert_eq!(summed_rows(&whole), report_rows(&report));
    assert_eq!(summed_dists(&whole), report_dists(&report));
}

#[test]
fn live_contributions_add_up_to_the_report_on_the_demo() {
    // 20 ms intervals: many without a packet, across which flows are active.
    check(&demo(), 20, 10, 300);
}

#[test]
fn live_contributions_add_up_to_the_report_on_a_mixed_capture() {
    if let Some(trace) = shared("groundtruth/mixed.pcap") {
        check(&trace, 500, 100, 1500);
    }
}

#[test]
fn live_contributions_add_up_to_the_report_on_a_lossy_capture() {
    if let Some(trace) = shared("groundtruth/lossy.pcap") {
        check(&trace, 1000, 250, 2000);
    }
}

/// The test of the test: without what late flows add, the sums differ.
#[test]
fn without_late_flows_the_sums_differ() {
    let (report, published) = live_run(&demo(), 20, 10, 300, true);
    let total = sum(&published.all);
    assert_ne!(summed_rows(&total), report_rows(&report));
    assert_ne!(summed_dists(&total), report_dists(&report));
}
