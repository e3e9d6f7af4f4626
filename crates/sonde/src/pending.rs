//! An output file that appears whole or not at all (`sonde anon`, `sonde thin`): sonde-output's
//! one atomic-write helper, written under a temporary name beside it and moved into place once
//! complete (a failed run leaves no half-written trace).

pub use sonde_output::PendingFile;
