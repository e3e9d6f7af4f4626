//! Gap statistics: count, min, max, sum and sum of squares of durations in ns, and a histogram
//! in power-of-two bins of microseconds (the `gap` measurement and associations share them).

/// Inter-arrival times of one FID, in ns.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gaps {
    pub(crate) n: u64,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) sum: u128,
    pub(crate) sum_sq: f64,
}

/// Histogram bins of the gaps: bin 0 holds [0, 2) µs, bin k [2^k, 2^(k+1)) µs.
pub(crate) const GAP_BINS: usize = 48;

/// One gap into its statistics and its histogram.
pub(crate) fn add_gap(g: &mut Gaps, histogram: &mut [u64; GAP_BINS], gap: u64) {
    if g.n == 0 || gap < g.min {
        g.min = gap;
    }
    g.max = g.max.max(gap);
    g.n += 1;
    g.sum += u128::from(gap);
    g.sum_sq += (gap as f64) * (gap as f64);
    let us = gap / 1000;
    let bin = if us < 2 { 0 } else { (63 - us.leading_zeros()) as usize };
    histogram[bin.min(GAP_BINS - 1)] += 1;
}
