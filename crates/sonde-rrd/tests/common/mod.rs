//! Shared by the integration tests: a deterministic random source, scenarios, and a reference
//! model of consolidation written from the definition (not from the store's code).

#![allow(dead_code)]

use sonde_rrd::{ArchiveSpec, Cf, Spec, Store};

/// A small LCG: the same numbers on every run.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A spec with every CF at several resolutions, small enough to wrap often.
pub fn small_spec() -> Spec {
    let mut archives = Vec::new();
    for cf in [Cf::Average, Cf::Min, Cf::Max, Cf::Last] {
        for (steps, rows) in [(1, 7), (3, 5), (4, 6), (12, 4)] {
            archives.push(ArchiveSpec { cf, steps, rows });
        }
    }
    Spec { step_s: 300, sources: vec!["bytes".into(), "rtt_p95".into(), "flows".into()], archives, xff: 0.5 }
}

/// A sequence of updates: mostly one step apart, some gaps (short and long), some unknown
/// values, values with fractions so sums round.
pub fn scenario(seed: u64, start_s: u64, step_s: u64, count: usize, sources: usize) -> Vec<(u64, Vec<f64>)> {
    let mut rng = Lcg(seed);
    let mut t = start_s;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let skip = match rng.below(40) {
            0 => 1 + rng.below(3),
            1 => 5 + rng.below(60),
            _ => 0,
        };
        t += step_s * (1 + skip);
        let values = (0..sources)
            .map(|_| if rng.below(8) == 0 { f64::NAN } else { rng.below(100_000) as f64 / 7.0 - 3000.0 })
            .collect();
        out.push((t, values));
    }
    out
}

/// The expected rows of archive `a`, oldest first, as (end time, values), from the definition:
/// a row ending at T covers the primary points ending at T − (steps − 1)·step … T; points not
/// given (skipped, or at or before the start) are unknown; the row is unknown when more than
/// xff·steps points are unknown; AVERAGE is the mean of the known points summed in time order,
/// MIN/MAX their extremes, LAST the last point.
pub fn expected_rows(spec: &Spec, start_s: u64, updates: &[(u64, Vec<f64>)], a: usize) -> Vec<(i64, Vec<f64>)> {
    let step = spec.step_s as i64;
    let arch = spec.archives[a];
    let n = i64::from(arch.steps);
    let row_s = step * n;
    let last = updates.last().map_or(start_s, |u| u.0) as i64;
    let point = |k: i64, s: usize| -> f64 {
        if k * step <= start_s as i64 {
            return f64::NAN;
        }
        match updates.binary_search_by_key(&((k * step) as u64), |u| u.0) {
            Ok(i) if updates[i].1[s].is_finite() => updates[i].1[s],
            _ => f64::NAN,
        }
    };
    let newest = last - last.rem_euclid(row_s);
    let mut rows = Vec::new();
    for i in 0..i64::from(arch.rows) {
        let t = newest - (i64::from(arch.rows) - 1 - i) * row_s;
        let values = (0..spec.sources.len())
            .map(|s| {
                if t <= start_s as i64 {
                    return f64::NAN;
                }
                let points: Vec<f64> = (t / step - n + 1..=t / step).map(|k| point(k, s)).collect();
                let known: Vec<f64> = points.iter().copied().filter(|v| !v.is_nan()).collect();
                if n == 1 {
                    return points[0];
                }
                let unknown = points.len() - known.len();
                if unknown as f64 > spec.xff * n as f64 {
                    return f64::NAN;
                }
                match arch.cf {
                    Cf::Average => known.iter().fold(0.0, |acc, v| acc + v) / known.len() as f64,
                    Cf::Min => known.iter().copied().fold(f64::INFINITY, f64::min),
                    Cf::Max => known.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    Cf::Last => points[points.len() - 1],
                }
            })
            .collect();
        rows.push((t, values));
    }
    rows
}

/// The store's rows of archive `a` in the same shape as [`expected_rows`].
pub fn stored_rows(store: &Store, a: usize) -> Vec<(i64, Vec<f64>)> {
    let rows = store.archive_rows(a).unwrap();
    let n = store.spec().sources.len();
    rows.times_s.iter().enumerate().map(|(i, &t)| (t, rows.values[i * n..(i + 1) * n].to_vec())).collect()
}

/// Equal, NaN equal to NaN.
pub fn same_values(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}
