//! `histograms.tsv`: sparse per-interval histograms; the figures sum a metric's bins over all
//! intervals and directions of the network.

use std::collections::BTreeMap;
use std::path::Path;

use crate::dist::HistBin;
use crate::error::PlotError;
use crate::table::Tsv;

/// A metric's histogram per `dir` value (`c2s`, `s2c`, `-`), summed over intervals and `net`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub dir: String,
    /// Samples in all bins.
    pub count: f64,
    /// Ascending by `lo`; each bin's share of `count`.
    pub bins: Vec<HistBin>,
}

/// The histograms of one metric (e.g. `tcp_rtt_sample`); empty when the file has no row of it.
pub fn read_histograms(path: &Path, metric: &str) -> Result<Vec<Histogram>, PlotError> {
    parse_histograms(Tsv::open(path)?, metric)
}

pub(crate) fn parse_histograms<R: std::io::Read>(tsv: Tsv<R>, metric: &str) -> Result<Vec<Histogram>, PlotError> {
    let (m, dir, lo, hi, count) =
        (tsv.column("metric")?, tsv.column("dir")?, tsv.column("bin_lo")?, tsv.column("bin_hi")?, tsv.column("count")?);
    // (dir, bin_lo bits, bin_hi bits) → count; the bits of non-negative floats sort as the floats.
    let mut sums: BTreeMap<(String, u64, u64), f64> = BTreeMap::new();
    tsv.for_each_row(|r| {
        if r.text(m) != metric {
            return Ok(());
        }
        let (l, h) = (r.number(lo, "bin_lo")?, r.number(hi, "bin_hi")?);
        if h <= l {
            return Err(r.error(format!("bin_hi {h} is not above bin_lo {l}")));
        }
        *sums.entry((r.text(dir).to_string(), l.to_bits(), h.to_bits())).or_default() += r.number(count, "count")?;
        Ok(())
    })?;
    let mut out: Vec<Histogram> = Vec::new();
    for ((d, l, h), c) in sums {
        if out.last().is_none_or(|x| x.dir != d) {
            out.push(Histogram { dir: d, count: 0.0, bins: Vec::new() });
        }
        if let Some(hist) = out.last_mut() {
            hist.count += c;
            hist.bins.push(HistBin { lo: f64::from_bits(l), hi: f64::from_bits(h), fraction: c });
        }
    }
    for hist in &mut out {
        for b in &mut hist.bins {
            b.fraction /= hist.count.max(1e-300);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_over_intervals_and_nets() {
        let text = "start\tend\tmetric\tdir\tnet\tbin_lo\tbin_hi\tcount\n\
                    0\t60\ttcp_rtt_sample\tc2s\tin\t10\t20\t3\n\
                    0\t60\ttcp_rtt_sample\tc2s\tout\t1\t2\t1\n\
                    60\t120\ttcp_rtt_sample\tc2s\tin\t10\t20\t4\n\
                    60\t120\tip_len\t-\tin\t0\t64\t100\n\
                    60\t120\ttcp_rtt_sample\ts2c\tin\t2\t5\t2\n";
        let h = parse_histograms(Tsv::new(Path::new("h.tsv"), text.as_bytes()).unwrap(), "tcp_rtt_sample").unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].dir.as_str(), h[0].count), ("c2s", 8.0));
        assert_eq!(
            h[0].bins,
            [HistBin { lo: 1.0, hi: 2.0, fraction: 0.125 }, HistBin { lo: 10.0, hi: 20.0, fraction: 0.875 }]
        );
        assert_eq!((h[1].dir.as_str(), h[1].count, h[1].bins[0].fraction), ("s2c", 2.0, 1.0));
        let none = parse_histograms(Tsv::new(Path::new("h.tsv"), text.as_bytes()).unwrap(), "tcp_hs_rtt").unwrap();
        assert!(none.is_empty());
        let bad = "start\tend\tmetric\tdir\tnet\tbin_lo\tbin_hi\tcount\n0\t60\tm\tc2s\tin\t5\t5\t1\n";
        let e = parse_histograms(Tsv::new(Path::new("h.tsv"), bad.as_bytes()).unwrap(), "m").unwrap_err();
        assert_eq!(e.to_string(), "h.tsv:2: bin_hi 5 is not above bin_lo 5");
    }
}
