//! sonde-merged: the merged view of several probes, as `sonde serve --merged DIR` serves it.
//!
//! Probes publish their intervals to Kafka (`sonde monitor --kafka`); the Spark merge job
//! (`python -m sonde.spark merge`) adds them up and writes four append-only changelogs of Parquet
//! files under one directory: `intervals/`, `quantiles/`, `histograms/` and `probes/`
//! (docs/merged.md gives their columns). In each, the row with the highest `batch` per key is the
//! merged view. [`Source`] reads the files that appeared since its last look (each file once:
//! they never change once in place; newest first), keeps the newest row of every key for the
//! newest `max_intervals` intervals, and makes the HTTP server's [`sonde_http::Snapshot`] of it, with
//! the same shapes a monitor publishes, so the API and dashboard show the merged view unchanged.
//!
//! Guarantees: a file that cannot be read (still being written, damaged, of another shape) is
//! skipped, counted and tried again at the next reload, never fatal; names starting with `_` or
//! `.` (Spark's temporary and metadata files) are not looked at. Memory holds the kept intervals,
//! the probes (at most `max_probes`) and the names of the files read that are still in the
//! directory.
//!
//! ```no_run
//! let mut source = sonde_merged::Source::open("merged".as_ref(), sonde_merged::Limits::default())?;
//! if source.reload() {
//!     let snapshot = source.view().snapshot("merged", 0.0, 0.0);
//!     # let _ = snapshot;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

#![forbid(unsafe_code)]

mod flows;
pub mod read;
mod source;
mod view;

pub use read::{read_file, Changelog, ReadError, Rows};
pub use source::Source;
pub use view::{Counters, Limits, MergedView};
