//! Consolidation: primary points in, rows out, exactly as rrdtool 1.7 does it for a GAUGE data
//! source fed one primary point per update (`rrd_update.c`: `update_cdp`, `initialize_cdp_val`,
//! `calculate_cdp_val`, `initialize_carry_over`). Pure arithmetic: no I/O.
//!
//! A row of an archive with `steps` = n ends at a time that is a multiple of n × step and covers
//! the n primary points before it. Its value is the AVERAGE / MIN / MAX of the known ones, or the
//! LAST point's value; it is unknown when more than `xff × n` of its points are unknown (points
//! before the store's start count as unknown).

use crate::spec::Cf;

/// rrdtool's `cdp_prep` for one (archive, source).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CdpState {
    /// The running sum (AVERAGE), minimum, maximum or last value of the row being built.
    pub value: f64,
    /// Unknown primary points in the row being built.
    pub unknown_pdps: u64,
    /// The value of the last row completed.
    pub primary: f64,
    /// The last primary point that completed a row (rrdtool's fill-in value).
    pub secondary: f64,
}

impl CdpState {
    /// The state rrdtool's `create` gives: nothing accumulated; the primary points of the first
    /// row that fall before the start count as unknown.
    pub fn at_creation(pdps_before_start_in_row: u64) -> CdpState {
        CdpState { value: f64::NAN, unknown_pdps: pdps_before_start_in_row, primary: 0.0, secondary: 0.0 }
    }

    /// Adds primary point `pdp` (NaN = unknown). `completes_row`: it is the last point of a row.
    /// Returns the row's value when one is completed. `steps` = 1 archives store every point.
    pub fn add(&mut self, cf: Cf, steps: u32, xff: f64, pdp: f64, completes_row: bool) -> Option<f64> {
        if steps == 1 {
            // rrdtool: nothing to consolidate, the row is the primary point (update_aberrant_CF).
            self.primary = pdp;
            return Some(pdp);
        }
        if !completes_row {
            if pdp.is_nan() {
                self.unknown_pdps += 1;
            } else {
                self.value = accumulate(cf, self.value, pdp);
            }
            return None;
        }
        if pdp.is_nan() {
            self.unknown_pdps += 1;
        }
        self.secondary = pdp;
        self.primary = if self.unknown_pdps as f64 > f64::from(steps) * xff {
            f64::NAN
        } else {
            finish(cf, self.value, pdp, steps - self.unknown_pdps as u32)
        };
        // The next row starts empty (rrdtool's initialize_carry_over with no carried points).
        self.value = match cf {
            Cf::Average => 0.0,
            Cf::Min => f64::INFINITY,
            Cf::Max => f64::NEG_INFINITY,
            Cf::Last => f64::NAN,
        };
        self.unknown_pdps = 0;
        Some(self.primary)
    }
}

/// rrdtool's calculate_cdp_val for one known point.
fn accumulate(cf: Cf, value: f64, pdp: f64) -> f64 {
    if value.is_nan() {
        return pdp;
    }
    match cf {
        Cf::Average => value + pdp,
        Cf::Min => lesser(pdp, value),
        Cf::Max => greater(pdp, value),
        Cf::Last => pdp,
    }
}

/// rrdtool's initialize_cdp_val: the row's value from the accumulated one and its last point.
fn finish(cf: Cf, value: f64, pdp: f64, known: u32) -> f64 {
    let or = |v: f64, default: f64| if v.is_nan() { default } else { v };
    match cf {
        Cf::Average => (or(value, 0.0) + or(pdp, 0.0)) / f64::from(known),
        Cf::Min => lesser(or(pdp, f64::INFINITY), or(value, f64::INFINITY)),
        Cf::Max => greater(or(pdp, f64::NEG_INFINITY), or(value, f64::NEG_INFINITY)),
        Cf::Last => pdp,
    }
}

/// rrdtool's `(new < old) ? new : old` (not `f64::min`, which may pick either zero).
fn lesser(new: f64, old: f64) -> f64 {
    if new < old {
        new
    } else {
        old
    }
}

fn greater(new: f64, old: f64) -> f64 {
    if new > old {
        new
    } else {
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: f64 = f64::NAN;

    /// Feeds rows of `steps` points (the state starts at a row boundary) and collects the rows.
    fn rows(cf: Cf, steps: u32, xff: f64, points: &[f64]) -> Vec<f64> {
        let mut s = CdpState::at_creation(0);
        let mut out = Vec::new();
        for (i, &p) in points.iter().enumerate() {
            let completes = (i + 1) % steps as usize == 0;
            if let Some(v) = s.add(cf, steps, xff, p, completes) {
                out.push(v);
            }
        }
        out
    }

    fn same(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
    }

    #[test]
    fn each_cf_over_known_points() {
        let p = [1.0, 5.0, 3.0, 2.0, 8.0, 4.0];
        assert!(same(&rows(Cf::Average, 3, 0.5, &p), &[3.0, 14.0 / 3.0]));
        assert!(same(&rows(Cf::Min, 3, 0.5, &p), &[1.0, 2.0]));
        assert!(same(&rows(Cf::Max, 3, 0.5, &p), &[5.0, 8.0]));
        assert!(same(&rows(Cf::Last, 3, 0.5, &p), &[3.0, 4.0]));
        assert!(same(&rows(Cf::Max, 1, 0.5, &p), &p));
    }

    #[test]
    fn unknown_points_and_xff() {
        // One unknown of four: 0.25 ≤ 0.5, known; the mean is over the three known points.
        let p = [2.0, U, 4.0, 6.0];
        assert!(same(&rows(Cf::Average, 4, 0.5, &p), &[4.0]));
        assert!(same(&rows(Cf::Min, 4, 0.5, &p), &[2.0]));
        // With xff 0.2 one unknown in four is too many.
        assert!(same(&rows(Cf::Average, 4, 0.2, &p), &[U]));
        // Two of four unknown: exactly xff × n, still known (rrdtool: unknown only when more).
        let p = [U, 3.0, U, 5.0];
        assert!(same(&rows(Cf::Average, 4, 0.5, &p), &[4.0]));
        let p = [U, 3.0, U, U];
        assert!(same(&rows(Cf::Max, 4, 0.5, &p), &[U]));
        // LAST takes the row's last point, even when it is the unknown one.
        assert!(same(&rows(Cf::Last, 2, 0.5, &[7.0, U]), &[U]));
        assert!(same(&rows(Cf::Last, 2, 0.5, &[U, 7.0]), &[7.0]));
    }

    #[test]
    fn a_row_after_an_unknown_row_starts_empty() {
        // The second row must not see the first row's values.
        assert!(same(&rows(Cf::Max, 2, 0.5, &[9.0, 9.0, U, 1.0]), &[9.0, 1.0]));
        assert!(same(&rows(Cf::Min, 2, 0.5, &[U, U, 4.0, 6.0]), &[U, 4.0]));
        assert!(same(&rows(Cf::Average, 2, 0.5, &[U, U, U, 6.0]), &[U, 6.0]));
    }

    #[test]
    fn points_before_the_start_are_unknown() {
        // Created one point into a row of 3: that point is unknown.
        let mut s = CdpState::at_creation(1);
        assert_eq!(s.add(Cf::Average, 3, 0.5, 2.0, false), None);
        assert_eq!(s.add(Cf::Average, 3, 0.5, 4.0, true), Some(3.0));
        let mut s = CdpState::at_creation(2);
        assert!(s.add(Cf::Average, 3, 0.5, 4.0, true).unwrap().is_nan());
    }
}
