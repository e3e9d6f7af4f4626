//! What the thinner measures of its load, once per second of packet time: the connection rate
//! over a sliding window (which the table is sized from when no rate is given), and per
//! 5-minute interval the reduction and the open handshakes against the paper's model (its
//! Fig. 8 and Figs. 9–11). Nothing here runs per packet: counts are differences of the
//! thinner's running [`ThinStats`].

use std::collections::VecDeque;

use crate::{ThinStats, Z99};

/// Seconds over which the connection rate is measured (the paper checks its model per minute).
pub const RATE_WINDOW_S: usize = 60;
/// Length of a report interval, in seconds (the 5 minutes; Tstat's RRD step).
pub const INTERVAL_S: u64 = 300;
/// The most intervals a report keeps: the latest week of 5-minute intervals.
pub const MAX_INTERVALS: usize = 2016;

/// New connections per second over the last [`RATE_WINDOW_S`] whole seconds.
#[derive(Debug, Clone)]
pub struct RateWindow {
    /// Connections that opened in each of the latest whole seconds, oldest first.
    seconds: VecDeque<u32>,
    sum: u64,
}

impl RateWindow {
    pub fn new() -> RateWindow {
        RateWindow { seconds: VecDeque::with_capacity(RATE_WINDOW_S), sum: 0 }
    }

    /// Records that `opened` connections opened in the second just ended, and `idle` seconds
    /// without any after it (a gap in the trace).
    pub fn push(&mut self, opened: u64, idle: u64) {
        let opened = u32::try_from(opened).unwrap_or(u32::MAX);
        for count in std::iter::once(opened).chain(std::iter::repeat_n(0, idle.min(RATE_WINDOW_S as u64) as usize)) {
            if self.seconds.len() == RATE_WINDOW_S {
                self.sum -= u64::from(self.seconds.pop_front().unwrap_or(0));
            }
            self.seconds.push_back(count);
            self.sum += u64::from(count);
        }
    }

    /// The mean rate over the seconds recorded (at most the window); `None` before the first.
    pub fn rate_per_s(&self) -> Option<f64> {
        (!self.seconds.is_empty()).then(|| self.sum as f64 / self.seconds.len() as f64)
    }
}

impl Default for RateWindow {
    fn default() -> Self {
        RateWindow::new()
    }
}

/// The paper's Eq. 1: the 99th percentile of the handshakes open at once, K = λ/μ + z₉₉·√(λ/μ),
/// for Poisson arrivals at `rate_per_s` each holding its entry `hold_s`.
pub fn open_handshakes_model(rate_per_s: f64, hold_s: f64) -> f64 {
    let open = rate_per_s * hold_s;
    open + Z99 * open.sqrt()
}

/// One 5-minute interval of thinning.
#[derive(Debug, Clone, PartialEq)]
pub struct ThinInterval {
    /// Its start, whole seconds of packet time (a multiple of [`INTERVAL_S`]).
    pub start_s: u64,
    /// Seconds of packet time it covers (the first and last intervals of a trace are partial).
    pub span_s: f64,
    pub packets: u64,
    pub tcp_packets: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    /// Connections that opened (client SYNs of new handshakes).
    pub connections: u64,
    /// `connections` per second of `span_s`.
    pub rate_per_s: f64,
    /// Eq. 1's K at that rate: the open handshakes the model expects (99th percentile).
    pub open_model: f64,
    /// The handshakes open, sampled once a second after expired entries are freed: their 99th
    /// percentile (nearest rank) and their largest.
    pub open_p99: u32,
    pub open_max: u32,
    /// Table slots at the interval's end.
    pub slots: u64,
}

/// The interval being filled.
#[derive(Debug, Clone)]
struct Open {
    start_s: u64,
    first_ns: u64,
    at_start: ThinStats,
    samples: Vec<u32>,
}

/// The closed intervals (the latest [`MAX_INTERVALS`]) and the one being filled.
#[derive(Debug, Clone, Default)]
pub struct Intervals {
    closed: VecDeque<ThinInterval>,
    /// Closed intervals left out because the report keeps only the latest.
    pub omitted: u64,
    open: Option<Open>,
}

impl Intervals {
    /// Called once per second of packet time `now_ns` (before the packet at that time counts):
    /// closes the interval if `now_ns` lies past it, and records the second's sample of open
    /// handshakes.
    pub fn second(&mut self, now_ns: u64, stats: &ThinStats, open: usize, slots: usize, hold_s: f64) {
        let start_s = now_ns / 1_000_000_000 / INTERVAL_S * INTERVAL_S;
        if self.open.as_ref().is_some_and(|o| o.start_s != start_s) {
            let end_ns = self.open.as_ref().map_or(now_ns, |o| (o.start_s + INTERVAL_S) * 1_000_000_000);
            self.close(end_ns.min(now_ns), stats, slots, hold_s);
        }
        let o = self.open.get_or_insert_with(|| Open {
            start_s,
            first_ns: now_ns,
            at_start: *stats,
            samples: Vec::with_capacity(INTERVAL_S as usize + 1),
        });
        // At most one sample a second; a trace that jumps ahead leaves no samples for the gap.
        if o.samples.len() <= INTERVAL_S as usize {
            o.samples.push(u32::try_from(open).unwrap_or(u32::MAX));
        }
    }

    fn close(&mut self, end_ns: u64, stats: &ThinStats, slots: usize, hold_s: f64) {
        let Some(mut o) = self.open.take() else { return };
        let a = &o.at_start;
        let span_s = (end_ns.saturating_sub(o.first_ns) as f64 / 1e9).clamp(1.0, INTERVAL_S as f64);
        let connections = stats.connections - a.connections;
        let rate_per_s = connections as f64 / span_s;
        o.samples.sort_unstable();
        let rank = ((0.99 * o.samples.len() as f64).ceil() as usize).clamp(1, o.samples.len().max(1)) - 1;
        if self.closed.len() == MAX_INTERVALS {
            self.closed.pop_front();
            self.omitted += 1;
        }
        self.closed.push_back(ThinInterval {
            start_s: o.start_s,
            span_s,
            packets: stats.packets - a.packets,
            tcp_packets: stats.tcp_packets - a.tcp_packets,
            dropped_packets: stats.dropped_packets - a.dropped_packets,
            dropped_bytes: stats.dropped_bytes - a.dropped_bytes,
            connections,
            rate_per_s,
            open_model: open_handshakes_model(rate_per_s, hold_s),
            open_p99: o.samples.get(rank).copied().unwrap_or(0),
            open_max: o.samples.last().copied().unwrap_or(0),
            slots: slots as u64,
        });
    }

    /// The closed intervals and, closed at `now_ns` on a copy, the one being filled.
    pub fn report(&self, now_ns: u64, stats: &ThinStats, slots: usize, hold_s: f64) -> Vec<ThinInterval> {
        let mut all = self.clone();
        all.close(now_ns, stats, slots, hold_s);
        all.closed.into()
    }
}
