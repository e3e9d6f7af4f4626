//! What a definition line becomes: the chain of patterns, its key, its measurements or its
//! association; and why a line was refused.

use std::fmt;

use crate::pattern::Pattern;

/// Most patterns in one definition (the matcher's depth).
pub const MAX_PATTERNS: usize = 32;

/// The longest definition name taken by default, in bytes (`--definition-name-max`): a name
/// reaches every definition output's rows, `/metrics` labels and the HTTP API, so a 60,000-byte
/// one would weigh on all of them.
pub const MAX_NAME_BYTES: usize = 128;

/// A parsed definition: a chain of patterns, all of which must match, and which pattern's value
/// is the flow identifier (FID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub name: String,
    /// In a canonical order (the decoder's facts, other tests by layer and offset, key-only
    /// reads last): chains that begin alike share their first tests when compiled.
    pub patterns: Vec<Pattern>,
    /// Indices into `patterns` of the FID's parts: the `key` fields (their values side by side,
    /// the first in the highest bits), else the last condition written.
    pub keys: Vec<usize>,
    /// The line as written (for listings and errors).
    pub text: String,
    /// What to measure (`measure count,gap,length`, or `none`; default `count`).
    pub measures: Measures,
    /// Interval of the counts (`every 10ms`); `None`: the run's.
    pub every_ns: Option<u64>,
    /// A FID's flow ends after this long without a packet (`idle 30s`, for `length`).
    pub idle_ns: u64,
    /// An association (`name = assoc A -> B …`) instead of patterns: `patterns` is empty.
    pub assoc: Option<Association>,
}

/// `name = assoc A -> B [within DURATION] [max N]`: each packet matching definition A arms B
/// with A's FID; a later packet matching B with the same FID, within the lifetime, gives one
/// A→B gap sample and disarms. A FID armed again before its answer is dropped as ambiguous
/// (Karn's rule: a retransmission cannot be told from the original).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Association {
    /// Indices of A and B among the definitions (both written earlier in the file).
    pub from: usize,
    pub to: usize,
    pub within_ns: u64,
    /// Most FIDs armed at once; arms beyond are refused and counted.
    pub max_armed: usize,
    /// `above` or `below`: B's last key part (this many bits) is a bound, not an exact value.
    pub bound: Option<Bound>,
}

/// B's last key part as a bound on A's (`assoc A -> B above|below`), in sequence-number
/// arithmetic over `bits` bits (a difference mod 2^bits below half the range is ahead), the
/// other parts equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub bits: u32,
    /// `above`: B answers every arm it reaches or passes (B ≥ A), as ACK ≥ seq + len answers
    /// every segment it covers. `below`: every arm at or past it (B ≤ A).
    pub above: bool,
}

/// Default lifetime of an arm.
pub const DEFAULT_WITHIN_NS: u64 = 10_000_000_000;
/// Default cap on outstanding arms.
pub const DEFAULT_MAX_ARMED: usize = 1_000_000;

/// The measurements a definition asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measures {
    /// Packets and bytes per FID and interval.
    pub count: bool,
    /// Inter-arrival times per FID.
    pub gap: bool,
    /// Flows per FID (packets, bytes, duration), ended by `idle`.
    pub length: bool,
}

/// A FID's flow ends after this long without a packet, unless `idle` says otherwise.
pub const DEFAULT_IDLE_NS: u64 = 60_000_000_000;

/// Why a definition was refused, and where: `line` and `column` count from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// The line's text, for the caret.
    pub source_line: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pad: String = self.source_line.chars().take(self.column.saturating_sub(1)).map(|_| ' ').collect();
        write!(f, "line {}, column {}: {}\n  {}\n  {pad}^", self.line, self.column, self.message, self.source_line)
    }
}

impl std::error::Error for ParseError {}
