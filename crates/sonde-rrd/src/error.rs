//! The one error type of the crate.

use std::fmt;
use std::io;

use crate::spec::{Cf, Spec, SpecError};

/// What went wrong. Messages say what was expected and what was found; the caller adds the
/// file's name.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing the file failed.
    Io(io::Error),
    /// [`crate::Store::create`] was given a spec that breaks a rule.
    InvalidSpec(SpecError),
    /// The file's header holds a spec that breaks a rule: the file is damaged.
    CorruptSpec(SpecError),
    /// The file is damaged (or is not a store at all); the text says which check failed.
    Corrupt(&'static str),
    /// The file was written by another version of the format.
    UnsupportedVersion { found: u32, supported: u32 },
    /// The file is shorter than its header says (or than any store).
    Truncated { expected_bytes: u64, found_bytes: u64 },
    /// The file is longer than its header says.
    TooLong { expected_bytes: u64, found_bytes: u64 },
    /// An update at or before the last one.
    NotAfterLastUpdate { t_s: u64, last_update_s: u64 },
    /// An update whose time is not a multiple of the step.
    OffGrid { t_s: u64, step_s: u64 },
    /// A time past [`crate::MAX_TIME_S`].
    TimeOutOfRange { t_s: u64 },
    /// An update with a number of values other than the number of data sources.
    ValueCount { expected: usize, got: usize },
    /// A fetch for a consolidation function no archive has.
    NoArchive(Cf),
    /// A fetch whose start is after its end.
    BadRange { start_s: u64, end_s: u64 },
    /// A fetch that would return more than [`crate::MAX_FETCH_ROWS`] rows.
    TooManyRows { rows: u64 },
    /// [`crate::Store::open_or_create`] found a store made with another spec.
    SpecMismatch,
    /// [`crate::append_steps`] or [`crate::check_appendable`] found a store made with another
    /// step, other data sources, or (when they must match) other archives.
    Incompatible { had: Box<Spec>, wanted: Box<Spec> },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::InvalidSpec(e) => write!(f, "invalid store spec: {e}"),
            Error::CorruptSpec(e) => write!(f, "damaged store: its header holds an invalid spec: {e}"),
            Error::Corrupt(what) => write!(f, "not a sonde store or damaged: {what}"),
            Error::UnsupportedVersion { found, supported } => {
                write!(f, "store format version {found}; this sonde reads version {supported}")
            }
            Error::Truncated { expected_bytes, found_bytes } => {
                write!(f, "truncated store: {found_bytes} bytes, its header needs {expected_bytes}")
            }
            Error::TooLong { expected_bytes, found_bytes } => {
                write!(f, "damaged store: {found_bytes} bytes, its header says {expected_bytes}")
            }
            Error::NotAfterLastUpdate { t_s, last_update_s } => {
                write!(f, "update at {t_s} s is not after the last update ({last_update_s} s)")
            }
            Error::OffGrid { t_s, step_s } => {
                write!(f, "update at {t_s} s is not on the step grid (a multiple of {step_s} s)")
            }
            Error::TimeOutOfRange { t_s } => write!(f, "time {t_s} s is out of range"),
            Error::ValueCount { expected, got } => {
                write!(f, "update with {got} values; the store has {expected} data sources")
            }
            Error::NoArchive(cf) => write!(f, "the store has no {cf} archive"),
            Error::BadRange { start_s, end_s } => write!(f, "start ({start_s} s) is after end ({end_s} s)"),
            Error::TooManyRows { rows } => write!(f, "the fetch would return {rows} rows; ask for a shorter range"),
            Error::SpecMismatch => f.write_str("the store exists with another spec (step, sources or archives)"),
            Error::Incompatible { had, wanted } => {
                write!(f, "the store was created with {}; this run asks for {}", had.summary(), wanted.summary())
            }
        }
    }
}

/// The message already includes the inner error's, so there is no `source()` (it would be printed twice).
impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}
