//! sonde-compare: two runs' flow logs side by side, after the fact.
//!
//! Used to judge what a change to the input or the analysis costs in accuracy — above all ACK
//! thinning (NATRA, Garcia-Jimenez et al. 2020, whose Tables 4 and 6 give, per field, the share
//! of flows whose value changed) — by comparing `sonde analyze` of a full trace (A) with that of
//! the changed one (B):
//! - flows are paired by their endpoints (`c_ip c_port s_ip s_port`), and among flows of the
//!   same endpoints by equal `first`, then in time order ([`pair`]);
//! - per field, the share of paired flows whose value changed, how many went up and down, and
//!   the mean relative change ([`FieldChange`]);
//! - the distributions over each log's flows of the RTT columns and of the flow duration
//!   (quantiles, and the two-sample Kolmogorov–Smirnov distance: the largest gap between the two
//!   CDFs) ([`Distribution`]), and of the RTTs again per direction — outbound (an internal client,
//!   `c_isint`) and inbound (an internal server) — as NATRA's Figs. 13–14 ([`DirectionDistributions`]).
//!
//! Numbers compare as numbers (a TSV log and a JSONL log of the same run compare equal); the
//! comparison does no I/O beyond reading the two logs, and its result is deterministic.
//!
//! ```
//! use sonde_compare::{compare, FlowLog};
//! use std::path::Path;
//! let a = "c_ip\tc_port\ts_ip\ts_port\tfirst\tc_pkts_all\n10.0.0.1\t1000\t10.0.0.2\t80\t5.0\t10\n";
//! let b = "c_ip\tc_port\ts_ip\ts_port\tfirst\tc_pkts_all\n10.0.0.1\t1000\t10.0.0.2\t80\t5.0\t6\n";
//! let a = FlowLog::parse_tsv(Path::new("a"), a.as_bytes()).unwrap();
//! let b = FlowLog::parse_tsv(Path::new("b"), b.as_bytes()).unwrap();
//! let c = compare(&a, &b).unwrap();
//! assert_eq!((c.matched, c.fields[1].changed, c.fields[1].decreased), (1, 1, 1));
//! ```

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

mod log;
mod report;

pub use log::{FlowLog, Value};
pub use report::render_text;

/// The columns that name a flow's endpoints; flows are paired on them.
pub const KEY_COLUMNS: [&str; 4] = ["c_ip", "c_port", "s_ip", "s_port"];

/// Which flows have a value of a column whose distribution is compared.
#[derive(Debug, Clone, Copy)]
enum Sampled {
    /// Those whose sample count (this column) is above 0.
    Counted(&'static str),
    /// Those whose value is above 0 (0 means none).
    Positive,
    /// Every flow.
    All,
}

/// The RTT columns whose distributions are compared, when a log has them.
const RTT_COLUMNS: [(&str, Sampled); 8] = [
    ("c_rtt_avg", Sampled::Counted("c_rtt_cnt")),
    ("s_rtt_avg", Sampled::Counted("s_rtt_cnt")),
    ("c_rtt_min", Sampled::Counted("c_rtt_cnt")),
    ("s_rtt_min", Sampled::Counted("s_rtt_cnt")),
    ("c_rtt_max", Sampled::Counted("c_rtt_cnt")),
    ("s_rtt_max", Sampled::Counted("s_rtt_cnt")),
    ("c_hs_rtt", Sampled::Positive),
    ("s_hs_rtt", Sampled::Positive),
];

/// The flow duration, compared over every flow (TCP logs' `durat`, UDP's per direction).
const DURATION_COLUMNS: [(&str, Sampled); 3] =
    [("durat", Sampled::All), ("c_durat", Sampled::All), ("s_durat", Sampled::All)];

#[derive(Debug)]
pub enum CompareError {
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    Malformed {
        path: PathBuf,
        line: usize,
        what: String,
    },
    /// A log lacks a column the pairing needs.
    MissingColumn {
        path: PathBuf,
        column: &'static str,
    },
}

impl std::fmt::Display for CompareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompareError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            CompareError::Malformed { path, line, what } => write!(f, "{}:{line}: {what}", path.display()),
            CompareError::MissingColumn { path, column } => {
                write!(f, "{}: no column {column} (not a sonde flow log?)", path.display())
            }
        }
    }
}

impl std::error::Error for CompareError {}

/// The result of comparing log A with log B.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub flows_a: u64,
    pub flows_b: u64,
    /// Flows found in both.
    pub matched: u64,
    pub only_a: u64,
    pub only_b: u64,
    /// Unpaired flows of A whose endpoints an unpaired flow of B has the other way round: the
    /// client and server roles swapped (a flow without handshake whose first packet B lacks).
    pub swapped_roles: u64,
    /// Every column both logs have, but the endpoints, in A's order.
    pub fields: Vec<FieldChange>,
    pub columns_only_a: Vec<String>,
    pub columns_only_b: Vec<String>,
    /// The RTT columns and the flow duration, over all flows.
    pub distributions: Vec<Distribution>,
    /// The RTT columns over the outbound and the inbound flows (none when no flow of either
    /// log has an internal endpoint, e.g. a run without `--net`).
    pub by_direction: Vec<DirectionDistributions>,
}

/// The RTT distributions of one direction of connections.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirectionDistributions {
    /// `outbound` (internal client, external server) or `inbound` (the other way round).
    pub direction: &'static str,
    /// Flows of that direction in A and in B.
    pub flows_a: u64,
    pub flows_b: u64,
    pub distributions: Vec<Distribution>,
}

/// How one field differs over the paired flows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FieldChange {
    pub name: String,
    /// Paired flows whose value differs.
    pub changed: u64,
    /// `changed` over the paired flows (0 when none were paired).
    pub share: f64,
    /// Of the changed values that are numbers on both sides: how many grew, how many shrank.
    pub increased: u64,
    pub decreased: u64,
    /// Mean of (B − A) / |A| over changed numeric values with A ≠ 0; `None` when there is none.
    pub mean_relative_change: Option<f64>,
}

/// A column's values over one log's flows.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct Quantiles {
    /// Flows with a value.
    pub flows: u64,
    pub mean: f64,
    pub p5: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
    pub p99: f64,
}

/// One RTT column's distribution in A and in B.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Distribution {
    pub name: String,
    pub a: Quantiles,
    pub b: Quantiles,
    /// Two-sample Kolmogorov–Smirnov distance: the largest gap between the two empirical CDFs
    /// (0 = same distribution, 1 = disjoint).
    pub ks_distance: f64,
}

/// Compares every flow and field of `a` with `b`.
pub fn compare(a: &FlowLog, b: &FlowLog) -> Result<Comparison, CompareError> {
    let pairs = pair(a, b)?;
    let matched = pairs.len() as u64;
    let mut fields = Vec::new();
    let mut columns_only_a = Vec::new();
    for (ia, name) in a.columns.iter().enumerate() {
        if KEY_COLUMNS.contains(&name.as_str()) {
            continue;
        }
        let Some(ib) = b.column(name) else {
            columns_only_a.push(name.clone());
            continue;
        };
        let mut change = FieldChange {
            name: name.clone(),
            changed: 0,
            share: 0.0,
            increased: 0,
            decreased: 0,
            mean_relative_change: None,
        };
        let (mut relative_sum, mut relative_n) = (0.0, 0u64);
        for &(ra, rb) in &pairs {
            let (va, vb) = (&a.rows[ra][ia], &b.rows[rb][ib]);
            if va.same_as(vb) {
                continue;
            }
            change.changed += 1;
            if let (Some(x), Some(y)) = (va.number(), vb.number()) {
                if y > x {
                    change.increased += 1;
                } else {
                    change.decreased += 1;
                }
                if x != 0.0 {
                    relative_sum += (y - x) / x.abs();
                    relative_n += 1;
                }
            }
        }
        if matched > 0 {
            change.share = change.changed as f64 / matched as f64;
        }
        if relative_n > 0 {
            change.mean_relative_change = Some(relative_sum / relative_n as f64);
        }
        fields.push(change);
    }
    let columns_only_b = b.columns.iter().filter(|c| a.column(c).is_none()).cloned().collect();
    let every = |_: &[Value]| true;
    let columns = RTT_COLUMNS.iter().chain(&DURATION_COLUMNS);
    let distributions = columns.filter_map(|&(name, sampled)| distribution(a, b, name, sampled, &every)).collect();
    let by_direction = [("outbound", true), ("inbound", false)]
        .into_iter()
        .filter_map(|(direction, client_internal)| {
            // A flow of the direction: exactly one endpoint internal, the client if outbound.
            let of = |log: &FlowLog| {
                let (c, s) = (log.column("c_isint")?, log.column("s_isint")?);
                Some(move |row: &[Value]| {
                    let flag = |v: &Value| v.number().is_some_and(|n| n != 0.0);
                    flag(&row[c]) == client_internal && flag(&row[s]) != client_internal
                })
            };
            let (in_a, in_b) = (of(a)?, of(b)?);
            let count = |log: &FlowLog, f: &dyn Fn(&[Value]) -> bool| log.rows.iter().filter(|r| f(r)).count() as u64;
            let (flows_a, flows_b) = (count(a, &in_a), count(b, &in_b));
            let distributions: Vec<_> = RTT_COLUMNS
                .iter()
                .filter_map(|&(name, sampled)| distribution2(a, b, name, sampled, &in_a, &in_b))
                .collect();
            // UDP logs have no RTT column: nothing to show per direction.
            (flows_a + flows_b > 0 && !distributions.is_empty()).then_some(DirectionDistributions {
                direction,
                flows_a,
                flows_b,
                distributions,
            })
        })
        .collect();
    Ok(Comparison {
        flows_a: a.rows.len() as u64,
        flows_b: b.rows.len() as u64,
        matched,
        only_a: (a.rows.len() - pairs.len()) as u64,
        only_b: (b.rows.len() - pairs.len()) as u64,
        swapped_roles: swapped_roles(a, b, &pairs)?,
        fields,
        columns_only_a,
        columns_only_b,
        distributions,
        by_direction,
    })
}

/// Column `name`'s distribution over the flows of A and of B that `keep` selects.
fn distribution(
    a: &FlowLog,
    b: &FlowLog,
    name: &str,
    sampled: Sampled,
    keep: &dyn Fn(&[Value]) -> bool,
) -> Option<Distribution> {
    distribution2(a, b, name, sampled, keep, keep)
}

fn distribution2(
    a: &FlowLog,
    b: &FlowLog,
    name: &str,
    sampled: Sampled,
    keep_a: &dyn Fn(&[Value]) -> bool,
    keep_b: &dyn Fn(&[Value]) -> bool,
) -> Option<Distribution> {
    let (va, vb) = (values(a, name, sampled, keep_a)?, values(b, name, sampled, keep_b)?);
    Some(Distribution {
        name: name.to_string(),
        ks_distance: ks_distance(&va, &vb),
        a: quantiles(&va),
        b: quantiles(&vb),
    })
}

/// Pairs A's flows with B's, as (row in A, row in B): flows of the same endpoints pair on an
/// equal `first` time, the rest of them in time order (a flow whose first packet B lacks still
/// pairs with its counterpart). Unpaired flows are those only one log has.
pub fn pair(a: &FlowLog, b: &FlowLog) -> Result<Vec<(usize, usize)>, CompareError> {
    type Group = (Vec<(f64, usize)>, Vec<(f64, usize)>);
    let mut groups: BTreeMap<Vec<String>, Group> = BTreeMap::new();
    for (side, log) in [a, b].into_iter().enumerate() {
        let keys = KEY_COLUMNS
            .iter()
            .map(|&k| log.column(k).ok_or(CompareError::MissingColumn { path: log.path.clone(), column: k }))
            .collect::<Result<Vec<_>, _>>()?;
        let first = log.column("first").or_else(|| log.column("c_first_abs"));
        for (row, values) in log.rows.iter().enumerate() {
            let key = keys.iter().map(|&k| cell_text(&values[k])).collect();
            let time = first.and_then(|f| values[f].number()).unwrap_or(0.0);
            let group = groups.entry(key).or_default();
            if side == 0 { &mut group.0 } else { &mut group.1 }.push((time, row));
        }
    }
    let mut pairs = Vec::new();
    for (_, (mut in_a, mut in_b)) in groups {
        in_a.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        in_b.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        // Both sorted by time: equal times pair in one merge pass.
        let (mut left_a, mut left_b) = (Vec::new(), Vec::new());
        let (mut i, mut j) = (0, 0);
        loop {
            match (in_a.get(i), in_b.get(j)) {
                (Some(&(ta, ra)), Some(&(tb, rb))) if ta == tb => {
                    pairs.push((ra, rb));
                    i += 1;
                    j += 1;
                }
                (Some(&(ta, ra)), Some(&(tb, _))) if ta < tb => {
                    left_a.push(ra);
                    i += 1;
                }
                (Some(&(_, ra)), None) => {
                    left_a.push(ra);
                    i += 1;
                }
                (_, Some(&(_, rb))) => {
                    left_b.push(rb);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        pairs.extend(left_a.into_iter().zip(left_b));
    }
    pairs.sort_unstable();
    Ok(pairs)
}

/// Counts the unpaired flows of A that an unpaired flow of B mirrors (each B flow once).
fn swapped_roles(a: &FlowLog, b: &FlowLog, pairs: &[(usize, usize)]) -> Result<u64, CompareError> {
    let endpoints = |log: &FlowLog, row: usize, reversed: bool| -> Result<Vec<String>, CompareError> {
        let order = if reversed { [2, 3, 0, 1] } else { [0, 1, 2, 3] };
        order
            .iter()
            .map(|&i| {
                let column = log
                    .column(KEY_COLUMNS[i])
                    .ok_or(CompareError::MissingColumn { path: log.path.clone(), column: KEY_COLUMNS[i] })?;
                Ok(cell_text(&log.rows[row][column]))
            })
            .collect()
    };
    let (mut paired_a, mut paired_b) = (vec![false; a.rows.len()], vec![false; b.rows.len()]);
    for &(ra, rb) in pairs {
        (paired_a[ra], paired_b[rb]) = (true, true);
    }
    let mut mirrored: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for rb in (0..b.rows.len()).filter(|&r| !paired_b[r]) {
        *mirrored.entry(endpoints(b, rb, true)?).or_default() += 1;
    }
    let mut swapped = 0;
    for ra in (0..a.rows.len()).filter(|&r| !paired_a[r]) {
        if let Some(n) = mirrored.get_mut(&endpoints(a, ra, false)?).filter(|n| **n > 0) {
            *n -= 1;
            swapped += 1;
        }
    }
    Ok(swapped)
}

fn cell_text(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::Text(t) => t.clone(),
        Value::Missing => String::new(),
    }
}

/// The column's values, sorted, over the flows `keep` selects that have one; `None` if the
/// log lacks the column.
fn values(log: &FlowLog, name: &str, sampled: Sampled, keep: &dyn Fn(&[Value]) -> bool) -> Option<Vec<f64>> {
    let column = log.column(name)?;
    let count = match sampled {
        Sampled::Counted(c) => log.column(c),
        _ => None,
    };
    // Without its count column, a counted metric's 0 means no sample, as a positive one's.
    let positive = matches!(sampled, Sampled::Positive) || matches!(sampled, Sampled::Counted(_)) && count.is_none();
    let mut values: Vec<f64> = log
        .rows
        .iter()
        .filter(|r| keep(r))
        .filter(|r| count.is_none_or(|c| r[c].number().is_some_and(|n| n > 0.0)))
        .filter_map(|r| r[column].number())
        .filter(|&v| v > 0.0 || !positive)
        .collect();
    values.sort_by(f64::total_cmp);
    Some(values)
}

/// Mean and nearest-rank quantiles of sorted values.
fn quantiles(sorted: &[f64]) -> Quantiles {
    if sorted.is_empty() {
        return Quantiles::default();
    }
    let at = |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    Quantiles {
        flows: sorted.len() as u64,
        mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
        p5: at(0.05),
        p25: at(0.25),
        p50: at(0.50),
        p75: at(0.75),
        p95: at(0.95),
        p99: at(0.99),
    }
}

/// The largest distance between the empirical CDFs of two sorted samples (0 if either is empty).
fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

#[cfg(test)]
mod tests;
