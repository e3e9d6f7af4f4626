//! Every error a run can meet, as a Python exception of one hierarchy, with the message the
//! CLI prints for it (without its `sonde: ` prefix):
//!
//! ```text
//! SondeError                  anything sonde raises
//! ├── SettingsError           an option is wrong (interval, filter, definitions file, key…)
//! ├── TraceError              the input cannot be read: missing, not a capture, unsupported
//! │   └── TruncatedTraceError the input ended early; everything before was analysed
//! │                           (the facade attaches that partial result as `.result`)
//! └── CaptureError            a live interface cannot be captured on
//! ```

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(sonde, SondeError, PyException, "Anything sonde raises.");
create_exception!(sonde, SettingsError, SondeError, "An option is wrong; the message says which and why.");
create_exception!(
    sonde,
    TraceError,
    SondeError,
    "The input cannot be read: missing, unreadable, not a capture, or a format variant sonde cannot read."
);
create_exception!(
    sonde,
    TruncatedTraceError,
    TraceError,
    "The input ended early (truncated or corrupt): everything before the damage was analysed, and \
     that partial run is the exception's `result`."
);
create_exception!(sonde, CaptureError, SondeError, "A live interface cannot be captured on.");

pub fn settings_error(message: impl Into<String>) -> PyErr {
    SettingsError::new_err(message.into())
}

/// An input that could not be opened, named as the CLI names it (`PATH: what`).
pub fn trace_error(input: &str, error: &dyn std::fmt::Display) -> PyErr {
    TraceError::new_err(format!("{input}: {error}"))
}

/// What went wrong past the settings that is sonde's own doing (an Arrow table that could not
/// be built), never the input's.
pub fn internal_error(what: &str, error: &dyn std::fmt::Display) -> PyErr {
    SondeError::new_err(format!("{what}: {error}"))
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SondeError", py.get_type::<SondeError>())?;
    m.add("SettingsError", py.get_type::<SettingsError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("TruncatedTraceError", py.get_type::<TruncatedTraceError>())?;
    m.add("CaptureError", py.get_type::<CaptureError>())?;
    Ok(())
}
