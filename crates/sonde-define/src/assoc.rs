//! Associations (`assoc A -> B`): arms by FID, answers, and the A→B gap samples.

use rustc_hash::FxHashMap;

use crate::gaps::{add_gap, Gaps, GAP_BINS};
use crate::Pattern;

/// One association's state and samples.
#[derive(Debug, Clone)]
pub(crate) struct Armed {
    /// Index of the association among the definitions, and of its A and B.
    pub(crate) def: usize,
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) within_ns: u64,
    pub(crate) max_armed: usize,
    /// FID → time armed.
    pub(crate) arms: FxHashMap<u128, u64>,
    /// With a bound (`above`, `below`): the FID's other parts → (last part, time armed), and how
    /// many in all.
    pub(crate) ranged: FxHashMap<u128, Vec<(u128, u64)>>,
    pub(crate) ranged_count: usize,
    pub(crate) bound: Option<crate::Bound>,
    pub(crate) samples: Gaps,
    pub(crate) dist: sonde_stats::Dist,
    pub(crate) histogram: [u64; GAP_BINS],
    /// The latest samples, (time answered, gap), for a phase plot of sample n against n+1.
    pub(crate) recent: std::collections::VecDeque<(u64, u64)>,
    /// Every sample, (time answered, gap), in the order taken, up to `log_limit`: what
    /// `definition_association_samples.tsv` writes for `sonde plot`'s phase plot.
    pub(crate) log: Vec<(u64, u64)>,
    pub(crate) log_limit: usize,
    /// Samples past `log_limit`, not kept one by one (still in the statistics).
    pub(crate) log_dropped: u64,
    /// Arms dropped because their FID was armed again before its answer (Karn's rule).
    pub(crate) ambiguous: u64,
    /// Arms refused: the table was full of live arms.
    pub(crate) refused: u64,
    /// Answers that came after the lifetime.
    pub(crate) expired: u64,
}

impl Armed {
    pub(crate) fn new(def: usize, a: &crate::Association, log_limit: usize) -> Armed {
        Armed {
            def,
            from: a.from,
            to: a.to,
            within_ns: a.within_ns,
            max_armed: a.max_armed,
            arms: FxHashMap::default(),
            ranged: FxHashMap::default(),
            ranged_count: 0,
            bound: a.bound,
            samples: Gaps::default(),
            dist: sonde_stats::Dist::new(sonde_stats::Binning::Log),
            histogram: [0; GAP_BINS],
            recent: std::collections::VecDeque::new(),
            log: Vec::new(),
            log_limit,
            log_dropped: 0,
            ambiguous: 0,
            refused: 0,
            expired: 0,
        }
    }
}

/// What an association measured.
#[derive(Debug, Clone, PartialEq)]
pub struct AssociationTotal {
    pub name: String,
    pub text: String,
    pub samples: u64,
    pub min_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    pub ambiguous: u64,
    pub refused: u64,
    pub expired: u64,
    /// Arms left unanswered at the end.
    pub unanswered: u64,
    /// Samples taken past the limit of [`crate::Counter::set_written_samples`]: not in
    /// `definition_association_samples.tsv`.
    pub samples_unwritten: u64,
}

/// The sample of an arm made at `armed_ns` and answered at `ts_ns`, unless past its lifetime.
fn sample(a: &mut Armed, armed_ns: u64, ts_ns: u64) {
    let gap = ts_ns.saturating_sub(armed_ns);
    if gap > a.within_ns {
        a.expired += 1;
        return;
    }
    add_gap(&mut a.samples, &mut a.histogram, gap);
    a.dist.add(gap);
    if a.recent.len() == RECENT_SAMPLES {
        a.recent.pop_front();
    }
    a.recent.push_back((ts_ns, gap));
    if a.log.len() < a.log_limit {
        a.log.push((ts_ns, gap));
    } else {
        a.log_dropped += 1;
    }
}

/// Samples per association written one by one to `definition_association_samples.tsv` by
/// default (the first ones taken; the rest are counted as not written).
pub const WRITTEN_SAMPLES: usize = 10_000;

/// Samples an association keeps one by one (the rest only in its statistics).
pub const RECENT_SAMPLES: usize = 2_000;

/// Splits a FID into its other parts and its last `bits`.
fn split(fid: u128, bits: u32) -> (u128, u128) {
    (if bits >= 128 { 0 } else { fid >> bits }, fid & Pattern::full_mask(bits))
}

/// B's packet with `fid` at `ts_ns`: answers its arm, or with a bound every arm it reaches
/// (`above`: at or behind B; `below`: at or ahead of B).
pub(crate) fn answer(a: &mut Armed, fid: u128, ts_ns: u64) {
    let Some(crate::Bound { bits, above }) = a.bound else {
        if let Some(armed_ns) = a.arms.remove(&fid) {
            sample(a, armed_ns, ts_ns);
        }
        return;
    };
    let (high, low) = split(fid, bits);
    let Some(mut arms) = a.ranged.remove(&high) else { return };
    let half = 1u128 << (bits - 1);
    let mask = Pattern::full_mask(bits);
    let before = arms.len();
    let mut answered = Vec::new();
    arms.retain(|&(armed_low, armed_ns)| {
        let ahead = if above { low.wrapping_sub(armed_low) } else { armed_low.wrapping_sub(low) };
        let reached = (ahead & mask) < half;
        if reached {
            answered.push(armed_ns);
        }
        !reached
    });
    a.ranged_count -= before - arms.len();
    for armed_ns in answered {
        sample(a, armed_ns, ts_ns);
    }
    if !arms.is_empty() {
        a.ranged.insert(high, arms);
    }
}

/// Arms `fid` at `ts_ns`: dropped instead if it is armed already (ambiguous); when the table
/// is full, the arms past their lifetime go first, and if none did, the new one is refused.
pub(crate) fn arm(a: &mut Armed, fid: u128, ts_ns: u64) {
    let split_fid = a.bound.map(|b| split(fid, b.bits));
    let armed_already = match split_fid {
        None => a.arms.remove(&fid).is_some(),
        Some((high, low)) => a.ranged.get_mut(&high).is_some_and(|v| {
            let before = v.len();
            v.retain(|e| e.0 != low);
            before != v.len()
        }),
    };
    if armed_already {
        if split_fid.is_some() {
            a.ranged_count -= 1;
        }
        a.ambiguous += 1;
        return;
    }
    if a.arms.len() + a.ranged_count >= a.max_armed {
        let within = a.within_ns;
        let before = a.arms.len() + a.ranged_count;
        a.arms.retain(|_, t| ts_ns.saturating_sub(*t) <= within);
        for v in a.ranged.values_mut() {
            v.retain(|e| ts_ns.saturating_sub(e.1) <= within);
        }
        a.ranged.retain(|_, v| !v.is_empty());
        a.ranged_count = a.ranged.values().map(Vec::len).sum();
        a.expired += (before - a.arms.len() - a.ranged_count) as u64;
        if a.arms.len() + a.ranged_count >= a.max_armed {
            a.refused += 1;
            return;
        }
    }
    match split_fid {
        None => {
            a.arms.insert(fid, ts_ns);
        }
        Some((high, low)) => {
            a.ranged.entry(high).or_default().push((low, ts_ns));
            a.ranged_count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_answers_every_arm_it_reaches_in_sequence_arithmetic() {
        let bound = Some(crate::Bound { bits: 32, above: true });
        let assoc = crate::Association { from: 0, to: 1, within_ns: 1_000, max_armed: 10, bound };
        let mut a = Armed::new(2, &assoc, 3);
        let fid = |conn: u128, seq: u32| (conn << 32) | u128::from(seq);
        for (ts, seq) in [(0, 100), (1, 200), (2, 300)] {
            arm(&mut a, fid(1, seq), ts);
        }
        arm(&mut a, fid(2, 100), 4);
        answer(&mut a, fid(1, 250), 10); // reaches 100 and 200, not 300, not the other connection
        assert_eq!((a.samples.n, a.samples.min, a.samples.max), (2, 9, 10));
        answer(&mut a, fid(1, 250), 11); // nothing left at or below 250
        assert_eq!(a.samples.n, 2);
        arm(&mut a, fid(1, 0xffff_fff0), 12);
        answer(&mut a, fid(1, 0x10), 14); // past 0xfffffff0 by wrapping; 300 is still ahead
        assert_eq!((a.samples.n, a.samples.min), (3, 2));
        arm(&mut a, fid(1, 300), 15); // armed again before its answer: ambiguous, dropped
        assert_eq!((a.ambiguous, a.ranged_count), (1, 1));
        answer(&mut a, fid(2, 5000), 2_000); // past the lifetime: expired, not a sample
        assert_eq!((a.samples.n, a.expired, a.ranged_count), (3, 1, 0));
        // Every sample kept, in the order taken (the limit is 3).
        assert_eq!((a.log.as_slice(), a.log_dropped), ([(10, 10), (10, 9), (14, 2)].as_slice(), 0));
    }

    #[test]
    fn below_answers_every_arm_at_or_ahead_of_it_in_sequence_arithmetic() {
        let bound = Some(crate::Bound { bits: 32, above: false });
        let assoc = crate::Association { from: 0, to: 1, within_ns: 1_000, max_armed: 10, bound };
        let mut a = Armed::new(2, &assoc, 3);
        let fid = |conn: u128, seq: u32| (conn << 32) | u128::from(seq);
        for (ts, seq) in [(0, 100), (1, 200), (2, 300)] {
            arm(&mut a, fid(1, seq), ts);
        }
        answer(&mut a, fid(1, 250), 10); // 300 is at or ahead of 250; 100 and 200 are behind
        assert_eq!((a.samples.n, a.samples.min, a.ranged_count), (1, 8, 2));
        answer(&mut a, fid(1, 200), 11); // 200 itself (an upper bound includes it)
        assert_eq!((a.samples.n, a.samples.max, a.ranged_count), (2, 10, 1));
        arm(&mut a, fid(1, 0x10), 12);
        answer(&mut a, fid(1, 0xffff_fff0), 14); // 0x10 and 100 are ahead of it by wrapping
        assert_eq!((a.samples.n, a.samples.min, a.ranged_count), (4, 2, 0));
        // Four samples, the limit 3: the first three kept (the last answer's first arm, 100 at
        // 0, gave the third), one counted as not written.
        assert_eq!((a.log.as_slice(), a.log_dropped), ([(10, 8), (11, 10), (14, 14)].as_slice(), 1));
    }
}
