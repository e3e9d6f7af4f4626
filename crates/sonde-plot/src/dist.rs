//! Empirical distributions: CDF and CCDF points, and histograms on log-spaced bins.

/// `P(X ≤ x)` at each distinct value `x`, ascending.
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let sorted = sorted(values);
    let n = sorted.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &x) in sorted.iter().enumerate() {
        let f = (i + 1) as f64 / n;
        match out.last_mut() {
            Some(last) if last.0 == x => last.1 = f,
            _ => out.push((x, f)),
        }
    }
    out
}

/// `P(X ≥ x)` at each distinct value `x`, ascending. (With `≥` the largest value keeps a
/// non-zero share, so every point can be drawn on a log axis.)
pub fn ccdf(values: &[f64]) -> Vec<(f64, f64)> {
    let sorted = sorted(values);
    let n = sorted.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &x) in sorted.iter().enumerate() {
        if out.last().is_none_or(|last| last.0 != x) {
            out.push((x, (sorted.len() - i) as f64 / n));
        }
    }
    out
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// One bin of a histogram: `[lo, hi)` and the share of the values in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistBin {
    pub lo: f64,
    pub hi: f64,
    pub fraction: f64,
}

/// The share of the positive values in each of `per_decade` log-spaced bins per decade (edges
/// at 10^(k/per_decade)); empty bins between the first and last are kept as 0. Values ≤ 0 are
/// left out (they have no place on a log axis).
pub fn log_histogram(values: &[f64], per_decade: u32) -> Vec<HistBin> {
    let b = f64::from(per_decade);
    let positive: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0 && v.is_finite()).collect();
    // The 1e-9 keeps an exact edge (10, 100 …) out of the bin below it despite rounding.
    let index = |v: f64| (v.log10() * b + 1e-9).floor() as i64;
    let (Some(first), Some(last)) =
        (positive.iter().map(|&v| index(v)).min(), positive.iter().map(|&v| index(v)).max())
    else {
        return Vec::new();
    };
    let mut counts = vec![0usize; (last - first + 1) as usize];
    for &v in &positive {
        counts[(index(v) - first) as usize] += 1;
    }
    let n = positive.len() as f64;
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let k = (first + i as i64) as f64;
            HistBin { lo: 10f64.powf(k / b), hi: 10f64.powf((k + 1.0) / b), fraction: c as f64 / n }
        })
        .collect()
}

/// At most about `max` points of a monotone curve, keeping the first and the last: what a
/// figure needs of a distribution over millions of flows.
pub fn thin(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 2 {
        return points.to_vec();
    }
    let step = points.len().div_ceil(max - 1);
    let mut out: Vec<(f64, f64)> = points.iter().step_by(step).copied().collect();
    if out.last() != points.last() {
        out.extend(points.last());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_and_ccdf_by_hand() {
        // Sorted: 1, 2, 2, 5, 10. P(X ≤ x): 1/5, 3/5, 4/5, 1. P(X ≥ x): 1, 4/5, 2/5, 1/5.
        let v = [5.0, 2.0, 10.0, 1.0, 2.0];
        assert_eq!(cdf(&v), [(1.0, 0.2), (2.0, 0.6), (5.0, 0.8), (10.0, 1.0)]);
        assert_eq!(ccdf(&v), [(1.0, 1.0), (2.0, 0.8), (5.0, 0.4), (10.0, 0.2)]);
        assert!(cdf(&[]).is_empty());
        assert_eq!(cdf(&[f64::NAN, 3.0]), [(3.0, 1.0)]);
    }

    #[test]
    fn log_histogram_by_hand() {
        // One bin per decade: 0.5 in [0.1, 1); 3 and 9.9 in [1, 10); 10 in [10, 100); [100, 1000)
        // empty but kept; 5000 in [1000, 10000); 0 left out. Five values: 1/5 each.
        let bins = log_histogram(&[0.5, 3.0, 9.9, 10.0, 5000.0, 0.0], 1);
        let got: Vec<(f64, f64, f64)> = bins.iter().map(|b| (b.lo, b.hi, b.fraction)).collect();
        let want =
            [(0.1, 1.0, 0.2), (1.0, 10.0, 0.4), (10.0, 100.0, 0.2), (100.0, 1000.0, 0.0), (1000.0, 10000.0, 0.2)];
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g.0 - w.0).abs() < 1e-12 && (g.1 - w.1).abs() < 1e-9 && (g.2 - w.2).abs() < 1e-12,
                "{g:?} vs {w:?}"
            );
        }
        assert!(log_histogram(&[0.0], 10).is_empty());
    }

    #[test]
    fn thinning_keeps_the_ends() {
        let pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, i as f64 / 999.0)).collect();
        let t = thin(&pts, 100);
        assert!(t.len() <= 101, "{}", t.len());
        assert_eq!((t[0], *t.last().unwrap()), (pts[0], pts[999]));
        assert_eq!(thin(&pts[..5], 100), &pts[..5]);
    }
}
