//! The run summary: summary.json ([`sonde_output::Summary`], here under its old name) and the
//! short human version on stderr.

use std::path::Path;

pub use sonde_output::summary::{Monitoring, Summary as RunReport, Timing};

/// The short summary for a person, on stderr. Write errors (a closed pipe) are ignored.
pub fn print_human(r: &RunReport, out_dir: &Path) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(r.human(out_dir).as_bytes());
}
