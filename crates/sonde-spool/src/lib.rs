//! sonde-spool: where a long-running monitor's outputs go, and which of them are safe to move.
//!
//! `sonde monitor` runs for months; every so often it hands over a *chunk*: a set of output
//! files (name → bytes) covering a span of packet time. A [`Spool`] puts each chunk into its
//! own directory `<location>/<chunk>/` in one of several storage locations, each with an
//! optional byte quota ([`Location`], parsed from `PATH` or `PATH:QUOTA` such as `/data:20G`).
//!
//! Placement: a location's usage is the bytes of the files its manifest lists that are still
//! there (re-checked before every placement, so moving complete files away frees quota; a chunk
//! directory whose mtime has not moved is not looked into again, so a file changed in place
//! keeps the size it had). A chunk goes to the first location, in the order given, where
//! usage + chunk ≤ quota; when one reaches its threshold the chunks continue in the next. If
//! none has room, the chunk still
//! goes to the location with the most room left and is flagged over quota: data is never
//! dropped. A location that fails (no space, permissions) is cleaned up and the next tried.
//!
//! The contract, for whoever moves files away: each location's `manifest.tsv` lists one
//! complete file per line (`chunk file bytes first_ts end_ts completed_unix_s`). A file is
//! written as `name.part`, synced, renamed to `name`, and only then listed (the manifest is
//! replaced atomically), so **a file listed in the manifest is whole on disk and safe to move
//! or delete**; a file not listed may be in the middle of being written. A line can outlive
//! its file (moved away) until the spool next rewrites that manifest.
//!
//! Restart: [`Spool::open`] reads each manifest and continues counting usage; `.part` files of
//! an interrupted chunk are removed and reported, whole files no manifest lists are reported
//! and kept ([`Spool::leftovers`]). A chunk name already in use is refused, never overwritten.
//! One spool per location at a time: `open` removes `.part` files, which would break another
//! writer's chunk. The wall clock is read for the manifest's `completed_unix_s` (metadata) and
//! to tell a directory's recent mtime (see above); packet time is what the caller passes.
//! Guide: docs/spool.md.
//!
//! ```
//! use sonde_spool::{Location, Spool};
//! let dir = tempfile::tempdir().unwrap();
//! let a: Location = format!("{}:1K", dir.path().join("a").display()).parse().unwrap();
//! let b: Location = dir.path().join("b").display().to_string().parse().unwrap();
//! let mut spool = Spool::open(vec![a, b]).unwrap();
//! let rows = vec![b'x'; 600];
//! let first = spool.write_chunk("0000", 0, 300_000_000_000, &[("intervals.tsv", &rows)]).unwrap();
//! assert_eq!(first.location_index, 0);
//! let second = spool.write_chunk("0300", 300_000_000_000, 600_000_000_000, &[("intervals.tsv", &rows)]).unwrap();
//! assert_eq!(second.location_index, 1); // 1200 bytes would pass a's 1 KiB quota
//! let manifest = std::fs::read_to_string(dir.path().join("a/manifest.tsv")).unwrap();
//! assert!(manifest.contains("0000\tintervals.tsv\t600\t0.000000000\t300.000000000\t"));
//! ```

#![forbid(unsafe_code)]

mod chunks;
mod error;
mod location;
mod manifest;
mod spool;

pub use chunks::{ChunkError, ChunkShape, Every, LocationSummary, Rotation, SpoolSummary};
pub use error::{Failure, SpoolError};
pub use location::{parse_quota_bytes, Location, LocationParseError, QuotaProblem};
pub use manifest::{HEADER as MANIFEST_HEADER, MANIFEST_NAME, PART_SUFFIX};
pub use spool::{Leftover, LocationStats, Placed, Spool, SpoolStats};

#[cfg(test)]
mod tests;
