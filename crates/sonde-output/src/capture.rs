//! `capture.tsv`: a live capture's counters per interval.

use sonde_stats::report::seconds;

/// What the capture's sockets counted (summed over interfaces and readers), as plain numbers:
/// the capture backends' own counters convert into it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureCounters {
    /// Packets the sockets were offered.
    pub received_pkts: u64,
    /// Lost because the ring or buffer was full.
    pub dropped_pkts: u64,
    /// Lost by the interface or its driver.
    pub if_dropped_pkts: u64,
}

/// The text of capture.tsv: one line per interval (by start, ns) in which the counters were
/// read, with what the sockets were offered and dropped in it.
pub fn capture_tsv(intervals: &[(u64, CaptureCounters)], interval_ns: u64) -> String {
    let mut out = String::from("start\tend\treceived_pkts\tdropped_pkts\tif_dropped_pkts\n");
    for (start_ns, c) in intervals {
        let end = seconds(start_ns.saturating_add(interval_ns));
        let start = seconds(*start_ns);
        out.push_str(&format!("{start}\t{end}\t{}\t{}\t{}\n", c.received_pkts, c.dropped_pkts, c.if_dropped_pkts));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval() {
        let c = CaptureCounters { received_pkts: 10, dropped_pkts: 2, if_dropped_pkts: 1 };
        let text = capture_tsv(&[(1_000_000_000, c), (2_000_000_000, CaptureCounters::default())], 1_000_000_000);
        assert_eq!(
            text,
            "start\tend\treceived_pkts\tdropped_pkts\tif_dropped_pkts\n1.000000\t2.000000\t10\t2\t1\n\
             2.000000\t3.000000\t0\t0\t0\n"
        );
    }
}
