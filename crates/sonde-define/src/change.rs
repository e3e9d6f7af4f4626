//! Changes to the set of definitions while running: what they are and what became of them.

/// A change to the set of definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new definition line (its name must be new).
    Add(String),
    /// A definition line whose name exists: the old one stops, with what it counted, and the
    /// new one starts from nothing.
    Replace(String),
    /// Stops the named definition (what it counted stays in the outputs).
    Remove(String),
}

/// A change to apply when the packets reach `at_ns`, made against `expected_version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledChange {
    pub at_ns: u64,
    pub expected_version: u64,
    pub change: Change,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeError {
    /// Made against another version than the current one (someone changed the set first).
    Conflict {
        expected: u64,
        current: u64,
    },
    Invalid(crate::ParseError),
    Unknown(String),
    Exists(String),
    /// An active association uses the definition.
    InUse {
        name: String,
        by: String,
    },
    /// The run was started without a definitions counter.
    NotCounting,
}

impl std::fmt::Display for ChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChangeError::Conflict { expected, current } => {
                write!(f, "conflict: the change was made against version {expected}, the set is at version {current}")
            }
            ChangeError::Invalid(e) => write!(f, "refused: {e}"),
            ChangeError::Unknown(name) => write!(f, "no definition `{name}`"),
            ChangeError::Exists(name) => write!(f, "`{name}` exists already (replace it instead)"),
            ChangeError::InUse { name, by } => write!(f, "`{name}` is used by the association `{by}`"),
            ChangeError::NotCounting => write!(f, "this run counts no flow definitions"),
        }
    }
}

/// A scheduled change and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeOutcome {
    pub at_ns: u64,
    pub change: Change,
    /// The new version, or why not.
    pub result: Result<u64, ChangeError>,
}
