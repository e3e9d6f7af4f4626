//! Histogram bins and distributions. One binning per metric serves both the histogram written
//! out and the percentiles read from it, so a bin's width is the percentiles' error bound.
//! Values are integers in the metric's base unit (ns, bytes, parts per million…), so sums and
//! merges are exact and the same in any order: results do not depend on the thread count.

use rustc_hash::FxHashMap;

/// Bits of mantissa kept by [`Binning::Log`]: 64 bins per power of two.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;

/// How a metric's values fall into bins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binning {
    /// Bins `width` units wide from 0. A percentile is within `width / 2` of the exact one
    /// (exact for width 1).
    Linear(u64),
    /// Logarithmic, as HDR histograms: one bin per value below 128, then 64 bins per power of
    /// two. A percentile is within 1/128 (0.79 %) of the exact one.
    Log,
}

impl Binning {
    /// The bin `value` falls into.
    pub fn bin(self, value: u64) -> u32 {
        match self {
            Binning::Linear(width) => (value / width.max(1)).min(u64::from(u32::MAX)) as u32,
            Binning::Log => {
                if value < 2 * SUB {
                    return value as u32;
                }
                let shift = (63 - value.leading_zeros()) - SUB_BITS; // ≥ 1
                let mantissa = value >> shift; // in [64, 128)
                (2 * SUB + u64::from(shift - 1) * SUB + (mantissa - SUB)) as u32
            }
        }
    }

    /// Bin `i`'s values: `[lo, hi)` (`hi` saturates at `u64::MAX`).
    pub fn range(self, i: u32) -> (u64, u64) {
        let i = u64::from(i);
        match self {
            Binning::Linear(width) => {
                let width = width.max(1);
                (i * width, (i + 1).saturating_mul(width))
            }
            Binning::Log => {
                if i < 2 * SUB {
                    return (i, i + 1);
                }
                let shift = (i - 2 * SUB) / SUB + 1;
                let mantissa = (i - 2 * SUB) % SUB + SUB;
                let hi = if mantissa + 1 == 2 * SUB && shift + u64::from(SUB_BITS) + 1 >= 64 {
                    u64::MAX
                } else {
                    (mantissa + 1) << shift
                };
                (mantissa << shift, hi)
            }
        }
    }
}

/// A distribution of one metric over one interval: exact count, sum, minimum and maximum, and
/// the non-empty bins (a hash map: sparse, so a quiet interval costs little, and cheap to add
/// to; sorted only when read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dist {
    pub binning: Binning,
    pub count: u64,
    pub sum: u128,
    pub min: u64,
    pub max: u64,
    pub bins: FxHashMap<u32, u64>,
}

impl Dist {
    pub fn new(binning: Binning) -> Self {
        Dist { binning, count: 0, sum: 0, min: u64::MAX, max: 0, bins: FxHashMap::default() }
    }

    pub fn add(&mut self, value: u64) {
        self.add_n(value, 1);
    }

    pub fn add_n(&mut self, value: u64, n: u64) {
        self.count += n;
        self.sum += u128::from(value) * u128::from(n);
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        *self.bins.entry(self.binning.bin(value)).or_default() += n;
    }

    /// Adds `other` (same binning) into `self`.
    pub fn merge(&mut self, other: &Dist) {
        debug_assert_eq!(self.binning, other.binning);
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        for (&bin, &n) in &other.bins {
            *self.bins.entry(bin).or_default() += n;
        }
    }

    /// The non-empty bins in order: (bin, count).
    pub fn sorted_bins(&self) -> Vec<(u32, u64)> {
        let mut bins: Vec<(u32, u64)> = self.bins.iter().map(|(&b, &n)| (b, n)).collect();
        // Bins are unique: ordering by the bin alone is enough, and cheaper than by the pair.
        bins.sort_unstable_by_key(|&(bin, _)| bin);
        bins
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// The `percent`-th percentile by nearest rank (the smallest value with at least `percent` %
    /// of the values at or below it), read from the bins: the bin's middle, kept within the
    /// exact minimum and maximum. Within the binning's bound of the exact percentile.
    pub fn percentile(&self, percent: u32) -> Option<u64> {
        self.percentiles([percent]).map(|[p]| p)
    }

    /// Several percentiles (as [`Dist::percentile`]) from one pass over the bins sorted once.
    pub fn percentiles<const N: usize>(&self, percents: [u32; N]) -> Option<[u64; N]> {
        if self.count == 0 {
            return None;
        }
        let bins = self.sorted_bins().into_iter().map(|(bin, n)| {
            let (lo, hi) = self.binning.range(bin);
            (lo, hi, n)
        });
        Some(percentiles(self.count, self.min, self.max, bins, percents))
    }
}

/// sonde's percentile rule, the one definition (the merge of many probes calls it through the
/// Python binding): nearest rank (the smallest value with at least `percent` % of the `count`
/// values at or below it, `percent` taken within 1..=100) over `bins` — `(lo, hi, n)`, the bin
/// `[lo, hi)` holding `n` values, sorted by `lo` — reported as the middle of the bin holding that
/// rank, kept within the exact `min` and `max`; `max` when the bins hold fewer than the rank.
pub fn percentiles<const N: usize>(
    count: u64,
    min: u64,
    max: u64,
    bins: impl IntoIterator<Item = (u64, u64, u64)>,
    percents: [u32; N],
) -> [u64; N] {
    let rank = |percent: u32| (u128::from(count) * u128::from(percent.clamp(1, 100))).div_ceil(100) as u64;
    let ranks = percents.map(rank);
    let last = ranks.iter().copied().max().unwrap_or(0);
    let mut found = [max; N];
    let mut seen = 0u64;
    for (lo, hi, n) in bins {
        seen = seen.saturating_add(n);
        let value = || (lo + (hi.saturating_sub(lo)) / 2).clamp(min, max.max(min));
        for (rank, found) in ranks.iter().zip(&mut found) {
            if seen >= *rank && seen - n < *rank {
                *found = value();
            }
        }
        if seen >= last {
            break;
        }
    }
    found
}

/// A per-packet distribution of small values (`Linear(1)` bins below `size`) counted in a dense
/// array, with the bins touched remembered so that turning it into a [`Dist`] at the end of an
/// interval costs only what the interval used.
#[derive(Debug, Clone)]
pub struct DenseDist {
    counts: Vec<u64>,
    touched: Vec<u32>,
}

impl DenseDist {
    pub fn new(size: usize) -> Self {
        DenseDist { counts: vec![0; size], touched: Vec::new() }
    }

    #[inline]
    pub fn add(&mut self, value: u64) {
        let i = (value as usize).min(self.counts.len() - 1);
        if self.counts[i] == 0 {
            self.touched.push(i as u32);
        }
        self.counts[i] += 1;
    }

    /// The distribution so far, leaving `self` empty.
    pub fn take(&mut self) -> Dist {
        let mut dist = Dist::new(Binning::Linear(1));
        self.touched.sort_unstable();
        for &i in &self.touched {
            dist.add_n(u64::from(i), std::mem::take(&mut self.counts[i as usize]));
        }
        self.touched.clear();
        dist
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_over_explicit_bins_are_the_distributions_rule() {
        // Nearest rank over the bins, the bin's middle (rounded down), kept within min and max.
        let bins = [(128, 130, 3), (130, 132, 1), (1024, 1040, 6)];
        assert_eq!(percentiles(10, 128, 1039, bins, [30, 40, 99]), [129, 131, 1032]);
        assert_eq!(percentiles(10, 128, 1030, bins, [99]), [1030]);
        assert_eq!(percentiles(1, 5, 5, [(5, 6, 1)], [50]), [5]);
        // And a distribution's own percentiles are the same rule over its bins.
        let mut d = Dist::new(Binning::Log);
        for v in [3, 90, 1_000, 1_000, 52_000, 7_000_000] {
            d.add(v);
        }
        let ranges = d.sorted_bins().into_iter().map(|(bin, n)| {
            let (lo, hi) = d.binning.range(bin);
            (lo, hi, n)
        });
        let explicit = percentiles(d.count, d.min, d.max, ranges, [1, 50, 95, 99]);
        assert_eq!(d.percentiles([1, 50, 95, 99]), Some(explicit));
        assert_eq!(explicit[0], 3);
    }

    #[test]
    fn log_bins_cover_every_value_once_and_in_order() {
        let b = Binning::Log;
        let mut last_hi = 0;
        for i in 0..(2 * SUB as u32 + 58 * SUB as u32) {
            let (lo, hi) = b.range(i);
            assert_eq!(lo, last_hi, "bin {i} starts where {} ended", i.saturating_sub(1));
            assert!(hi > lo);
            assert_eq!(b.bin(lo), i);
            assert_eq!(b.bin(hi - 1), i);
            if hi == u64::MAX {
                break;
            }
            last_hi = hi;
        }
        assert_eq!(b.bin(u64::MAX), b.bin(u64::MAX - 1));
    }

    #[test]
    fn log_bins_are_at_most_a_64th_wide() {
        for v in [128u64, 1000, 123_456, 987_654_321, u64::MAX / 3] {
            let (lo, hi) = Binning::Log.range(Binning::Log.bin(v));
            assert!((hi - lo) * 64 <= lo, "{v}: [{lo}, {hi})");
        }
    }

    #[test]
    fn linear_bins() {
        let b = Binning::Linear(100);
        assert_eq!((b.bin(0), b.bin(99), b.bin(100)), (0, 0, 1));
        assert_eq!(b.range(3), (300, 400));
    }

    /// Nearest-rank percentile of sorted values.
    fn exact(sorted: &[u64], percent: u32) -> u64 {
        let rank = (sorted.len() as u64 * u64::from(percent)).div_ceil(100).max(1);
        sorted[rank as usize - 1]
    }

    #[test]
    fn percentiles_stay_within_the_bound() {
        // A deterministic spread of values over nine decades.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut values = Vec::new();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push((x % 1_000_000_000) >> (x % 30));
        }
        for binning in [Binning::Log, Binning::Linear(1), Binning::Linear(1000)] {
            let mut d = Dist::new(binning);
            values.iter().for_each(|&v| d.add(v));
            let mut sorted = values.clone();
            sorted.sort_unstable();
            for p in [1, 50, 95, 99, 100] {
                let (est, ex) = (d.percentile(p).unwrap(), exact(&sorted, p));
                let bound = match binning {
                    Binning::Log => ex / 128,
                    Binning::Linear(w) => w / 2,
                };
                assert!(est.abs_diff(ex) <= bound, "{binning:?} p{p}: {est} vs exact {ex}");
            }
            assert_eq!(d.count, values.len() as u64);
            assert_eq!(d.sum, values.iter().map(|&v| u128::from(v)).sum::<u128>());
            assert_eq!((d.min, d.max), (sorted[0], *sorted.last().unwrap()));
        }
    }

    #[test]
    fn merging_equals_adding_everything_to_one() {
        let (mut a, mut b, mut all) = (Dist::new(Binning::Log), Dist::new(Binning::Log), Dist::new(Binning::Log));
        for v in 0..5000u64 {
            let v = v * v;
            if v % 3 == 0 {
                a.add(v)
            } else {
                b.add(v)
            }
            all.add(v);
        }
        a.merge(&b);
        assert_eq!(a, all);
    }

    #[test]
    fn dense_matches_sparse() {
        let mut dense = DenseDist::new(256);
        let mut sparse = Dist::new(Binning::Linear(1));
        for v in [64u64, 128, 64, 1, 255, 300] {
            dense.add(v);
            sparse.add(v.min(255));
        }
        assert_eq!(dense.take(), sparse);
        assert_eq!(dense.take().count, 0);
    }
}
