//! What an operator changes while a run goes: flow definitions edited (API, dashboard, SIGHUP)
//! and internal networks reloaded. The reader asks at every drain and applies each change at
//! the packet it reaches, so a change has one exact place in packet time.

use sonde_define::{Change, ChangeError, Counter};

/// A reader's source of changes, asked in the reader's thread.
pub trait Controls: Send {
    /// At every drain, before the edits are taken: a reload of configuration files may queue
    /// edits here (it sees the set the reader counts now).
    fn at_drain(&mut self, _definitions: Option<&Counter>) {}
    /// An operator's change waiting to be applied, if any (asked at every drain and tick).
    fn next_edit(&mut self) -> Option<Edit>;
    /// New internal networks to tell directions by from the next packet (asked at every drain).
    fn next_internal_nets(&mut self) -> Option<Vec<ipnet::IpNet>> {
        None
    }
}

/// A change to the definitions made against version `expected_version` (`None`: whatever the
/// set is at, as a reload of the definitions file is); `reply` hears the new version or why it
/// was refused.
pub struct Edit {
    pub expected_version: Option<u64>,
    pub change: Change,
    pub reply: Box<dyn FnOnce(Result<u64, ChangeError>) + Send>,
}
