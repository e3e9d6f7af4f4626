//! The flow logs (`tcp_flows.tsv`, `udp_flows.tsv`): per flow, what the distributions need.

use std::path::Path;

use crate::error::PlotError;
use crate::table::Tsv;

/// What the distribution figures take from one flow.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSample {
    /// `durat`, converted from ms.
    pub duration_s: f64,
    /// `c_bytes_all`, `s_bytes_all`: payload bytes client→server and server→client.
    pub c2s_bytes: f64,
    pub s2c_bytes: f64,
    /// `c_rtt_avg`, `s_rtt_avg` (ms), only when the direction has RTT samples (`*_rtt_cnt` > 0).
    pub c2s_rtt_ms: Option<f64>,
    pub s2c_rtt_ms: Option<f64>,
    /// `first` (the first packet), converted from epoch ms; `None` without the column.
    pub start_s: Option<f64>,
    /// `c_pkts_all`, `s_pkts_all` > 0: the direction sent a packet (true without the columns).
    pub c2s_sent: bool,
    pub s2c_sent: bool,
}

impl FlowSample {
    /// Per direction that sent a packet, of a flow longer than 0: payload bits ÷ `durat`, in
    /// bit/s (`tcp_thru`'s rule; from `durat`'s microseconds, not the nanoseconds sonde-stats
    /// divides by, so a value may differ in its seventh digit).
    pub fn throughputs_bps(&self) -> impl Iterator<Item = f64> + '_ {
        [(self.c2s_sent, self.c2s_bytes), (self.s2c_sent, self.s2c_bytes)]
            .into_iter()
            .filter(move |(sent, _)| *sent && self.duration_s > 0.0)
            .map(move |(_, bytes)| bytes * 8.0 / self.duration_s)
    }
}

/// Reads a TSV flow log (TCP or UDP; the RTT columns are optional).
pub fn read_flows(path: &Path) -> Result<Vec<FlowSample>, PlotError> {
    parse_flows(Tsv::open(path)?)
}

pub(crate) fn parse_flows<R: std::io::Read>(tsv: Tsv<R>) -> Result<Vec<FlowSample>, PlotError> {
    let durat = tsv.column("durat")?;
    let (c_bytes, s_bytes) = (tsv.column("c_bytes_all")?, tsv.column("s_bytes_all")?);
    let rtt = |side: &str| {
        let avg = tsv.optional_column(&format!("{side}_rtt_avg"));
        avg.map(|a| (a, tsv.optional_column(&format!("{side}_rtt_cnt"))))
    };
    let (c_rtt, s_rtt) = (rtt("c"), rtt("s"));
    let first = tsv.optional_column("first");
    let (c_pkts, s_pkts) = (tsv.optional_column("c_pkts_all"), tsv.optional_column("s_pkts_all"));
    let mut flows = Vec::new();
    tsv.for_each_row(|r| {
        let rtt_of = |cols: Option<(usize, Option<usize>)>, name: &str| -> Result<Option<f64>, PlotError> {
            let Some((avg, cnt)) = cols else { return Ok(None) };
            let samples = match cnt {
                Some(c) => r.optional_number(c, &format!("{name}_rtt_cnt"))?.unwrap_or(0.0),
                None => 1.0,
            };
            let v = r.optional_number(avg, &format!("{name}_rtt_avg"))?;
            Ok(v.filter(|&v| samples > 0.0 && v > 0.0))
        };
        let sent = |col: Option<usize>, name: &str| -> Result<bool, PlotError> {
            col.map_or(Ok(true), |c| Ok(r.number(c, name)? > 0.0))
        };
        flows.push(FlowSample {
            start_s: first.map(|c| r.number(c, "first")).transpose()?.map(|ms| ms / 1e3),
            c2s_sent: sent(c_pkts, "c_pkts_all")?,
            s2c_sent: sent(s_pkts, "s_pkts_all")?,
            duration_s: r.number(durat, "durat")? / 1e3,
            c2s_bytes: r.number(c_bytes, "c_bytes_all")?,
            s2c_bytes: r.number(s_bytes, "s_bytes_all")?,
            c2s_rtt_ms: rtt_of(c_rtt, "c")?,
            s2c_rtt_ms: rtt_of(s_rtt, "s")?,
        });
        Ok(())
    })?;
    Ok(flows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_only_with_samples() {
        let text = "s_rtt_cnt\tdurat\tc_bytes_all\ts_bytes_all\tc_rtt_avg\tc_rtt_cnt\ts_rtt_avg\n\
                    5\t1500.000\t300\t5428\t40.417\t1\t0.018\n\
                    0\t0.000\t0\t0\t0.000\t0\t0.000\n";
        let flows = parse_flows(Tsv::new(Path::new("f.tsv"), text.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            flows[0],
            FlowSample {
                duration_s: 1.5,
                c2s_bytes: 300.0,
                s2c_bytes: 5428.0,
                c2s_rtt_ms: Some(40.417),
                s2c_rtt_ms: Some(0.018),
                start_s: None,
                c2s_sent: true,
                s2c_sent: true,
            }
        );
        assert_eq!((flows[1].c2s_rtt_ms, flows[1].s2c_rtt_ms), (None, None));
        // With `first` and the packet counts: the start in seconds, and which directions sent.
        let log =
            "first\tdurat\tc_bytes_all\ts_bytes_all\tc_pkts_all\ts_pkts_all\n1795307597062.711\t500\t100\t0\t2\t0\n";
        let flows = parse_flows(Tsv::new(Path::new("f.tsv"), log.as_bytes()).unwrap()).unwrap();
        assert_eq!((flows[0].start_s, flows[0].c2s_sent, flows[0].s2c_sent), (Some(1795307597.062711), true, false));
        // 100 B in 0.5 s from the client; the server sent no packet: no throughput for it.
        assert_eq!(flows[0].throughputs_bps().collect::<Vec<_>>(), [1600.0]);
        let udp = "durat\tc_bytes_all\ts_bytes_all\n250.203\t6000\t0\n";
        let flows = parse_flows(Tsv::new(Path::new("u.tsv"), udp.as_bytes()).unwrap()).unwrap();
        assert_eq!(flows[0].c2s_rtt_ms, None);
        let bad = "durat\tc_bytes_all\n1\t2\n";
        let e = parse_flows(Tsv::new(Path::new("u.tsv"), bad.as_bytes()).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "u.tsv: the header has no column `s_bytes_all`");
    }
}
