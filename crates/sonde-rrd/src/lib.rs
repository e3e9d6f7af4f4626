//! sonde-rrd: a round-robin time-series store, the last stage of continuous monitoring.
//!
//! sonde's monitor closes an interval every `step_s` seconds of packet time and adds one value
//! per series (bytes, flows, RTT mean and percentiles, …) to a [`Store`]: a file whose size is
//! fixed when it is created, holding several resolutions at once, consolidated exactly as
//! rrdtool consolidates a GAUGE data source (AVERAGE, MIN, MAX, LAST; rows aligned to multiples
//! of their length in time; unknown when more than `xff` of their points are unknown). So
//! monitoring can run forever without the file growing, and the data can be handed to rrdtool
//! ([`Store::export_rrdtool_xml`] writes what `rrdtool restore` reads) or to anything that reads
//! CSV ([`Store::dump_csv`]).
//!
//! Guarantees:
//! - The file never changes size after [`Store::create`]; updates write in place.
//! - The consolidation state lives in the file's header, so [`Store::open`] continues exactly
//!   where the last update left off: stopping and reopening between any two updates gives the
//!   same file, byte for byte, as one uninterrupted run.
//! - No clock is read: time is what the caller passes in (packet time), so a replayed trace
//!   gives the same store.
//! - A damaged, truncated or foreign file gives an [`Error`], never a panic.
//!
//! Rules for updates ([`Store::update`]): one primary point per step, at a time that is a
//! multiple of the step and after the last update (else an error, and nothing changes); steps
//! skipped in between are unknown; NaN and ±infinity are unknown.
//! [`append_steps`] adds a run's steps to a store that may already hold an earlier run's,
//! skipping the steps it holds.
//!
//! ```
//! use sonde_rrd::{Cf, Spec, Store};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("traffic.rrd");
//! let spec = Spec::tstat_default(300, vec!["bytes".into(), "rtt_p95".into()]);
//! let mut store = Store::create(&path, &spec, 0).unwrap();
//! let size = std::fs::metadata(&path).unwrap().len();
//! store.update(300, &[1500.0, 0.020]).unwrap();
//! store.update(600, &[2500.0, f64::NAN]).unwrap(); // RTT unknown in this interval
//! drop(store);
//!
//! let store = Store::open(&path).unwrap(); // e.g. after a restart
//! assert_eq!(store.last_update_s(), 600);
//! let fetched = store.fetch(Cf::Average, 300, 0, 600).unwrap();
//! assert_eq!(fetched.resolution_s, 300);
//! assert_eq!(fetched.rows[0].time_s, 300);
//! assert_eq!(fetched.rows[0].values, [1500.0, 0.020]);
//! assert!(fetched.rows[1].values[1].is_nan());
//! assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
//! ```

#![forbid(unsafe_code)]

mod append;
mod cdp;
mod error;
mod export;
mod format;
mod info;
mod spec;
mod store;

pub use append::{append_steps, check_appendable, Appended};
pub use error::Error;
pub use export::{civil, utc};
pub use spec::{check_name, ArchiveSpec, Cf, NameProblem, Spec, SpecError, DEFAULT_XFF, MAX_ARCHIVES, MAX_NAME_LEN};
pub use spec::{MAX_FILE_BYTES, MAX_SOURCES};
pub use store::{ArchiveRows, Fetched, Row, Store, MAX_FETCH_ROWS, MAX_TIME_S};
