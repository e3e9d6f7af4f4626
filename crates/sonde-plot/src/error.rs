//! The one error type of the crate: what went wrong, and in which file and line.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a figure could not be made. Every variant names the file it is about.
#[derive(Debug)]
#[non_exhaustive]
pub enum PlotError {
    /// A file could not be read or written.
    Io { path: PathBuf, source: std::io::Error },
    /// A line of an input file is not what its header announces. `line` counts from 1, the
    /// header being line 1.
    Parse { path: PathBuf, line: usize, reason: String },
    /// The header of an input file lacks a column the figure needs.
    MissingColumn { path: PathBuf, column: &'static str },
    /// None of the inputs a selection needs exists in the directory.
    NoInput { dir: PathBuf, wanted: String },
    /// A time-series store could not be read, or was not made by `sonde analyze`.
    Store { path: PathBuf, reason: String },
    /// plotters failed to draw or the PNG encoder failed (a bug or a full disk, not bad input).
    Render { path: PathBuf, reason: String },
    /// The inputs hold nothing any selected figure can draw (an empty store, intervals without
    /// a row): `notes` says what each figure lacked.
    NothingToDraw { notes: Vec<String> },
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlotError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            PlotError::Parse { path, line, reason } => write!(f, "{}:{line}: {reason}", path.display()),
            PlotError::MissingColumn { path, column } => {
                write!(f, "{}: the header has no column `{column}`", path.display())
            }
            PlotError::NoInput { dir, wanted } => write!(f, "{}: no {wanted} to plot", dir.display()),
            PlotError::Store { path, reason } => write!(f, "{}: {reason}", path.display()),
            PlotError::Render { path, reason } => write!(f, "{}: cannot draw the figure: {reason}", path.display()),
            PlotError::NothingToDraw { notes } => {
                write!(f, "nothing to draw, no figure written")?;
                notes.iter().try_for_each(|note| write!(f, "\n  {note}"))
            }
        }
    }
}

impl std::error::Error for PlotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PlotError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> PlotError {
    PlotError::Io { path: path.to_path_buf(), source }
}
