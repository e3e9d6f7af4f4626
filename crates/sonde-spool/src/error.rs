//! The errors of the crate.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// One location that could not take a chunk; the attempt left nothing behind there.
#[derive(Debug)]
pub struct Failure {
    pub location: PathBuf,
    /// What was being done: "creating", "writing", "renaming", "syncing", "writing the manifest".
    pub action: &'static str,
    pub path: PathBuf,
    pub error: io::Error,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}: {}", self.location.display(), self.action, self.path.display(), self.error)
    }
}

#[derive(Debug)]
#[non_exhaustive]
pub enum SpoolError {
    NoLocations,
    /// A location is the same directory as, or inside, another given before it (each would
    /// count or clean up the other's files).
    OverlappingLocations {
        location: PathBuf,
        other: PathBuf,
    },
    /// A location could not be set up by [`crate::Spool::open`].
    Location {
        path: PathBuf,
        action: &'static str,
        error: io::Error,
    },
    /// A location's manifest is not what the spool writes; `line` is 1-based.
    Manifest {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    InvalidName {
        name: String,
        problem: &'static str,
    },
    EmptyChunk {
        chunk: String,
    },
    /// A chunk of this name is listed in a manifest or its directory exists: complete data is
    /// never overwritten.
    ChunkExists {
        chunk: String,
        path: PathBuf,
    },
    BadSpan {
        first_ns: u64,
        end_ns: u64,
    },
    /// Every location failed; one failure per location, in the order tried.
    AllFailed {
        chunk: String,
        failures: Vec<Failure>,
    },
}

impl fmt::Display for SpoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpoolError::NoLocations => f.write_str("no storage location given"),
            SpoolError::OverlappingLocations { location, other } => {
                write!(f, "location {} is, holds or is inside location {}", location.display(), other.display())
            }
            SpoolError::Location { path, action, error } => write!(f, "location {}: {action}: {error}", path.display()),
            SpoolError::Manifest { path, line, problem } => {
                write!(f, "{} line {line}: {problem} (not a sonde spool manifest, or damaged)", path.display())
            }
            SpoolError::InvalidName { name, problem } => write!(f, "name {name:?}: {problem}"),
            SpoolError::EmptyChunk { chunk } => write!(f, "chunk {chunk}: no files"),
            SpoolError::ChunkExists { chunk, path } => {
                write!(f, "chunk {chunk} exists already ({}); complete data is never overwritten", path.display())
            }
            SpoolError::BadSpan { first_ns, end_ns } => {
                write!(f, "chunk span starts at {first_ns} ns, after its end at {end_ns} ns")
            }
            SpoolError::AllFailed { chunk, failures } => {
                write!(f, "no location could take chunk {chunk}")?;
                for failure in failures {
                    write!(f, "; {failure}")?;
                }
                Ok(())
            }
        }
    }
}

/// Messages already include the inner error's, so there is no `source()` (it would be printed twice).
impl std::error::Error for SpoolError {}
