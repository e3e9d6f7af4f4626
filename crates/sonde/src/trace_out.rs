//! Where the commands that write a trace (`anon`, `thin`) write it: a file, which appears only
//! once whole, or standard output for `-w -`.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use sonde_capture::{TraceFormat, TraceWriter, WriteError};
use sonde_output::PendingFile;

/// A trace writer to a file or to standard output.
pub type Out = TraceWriter<BufWriter<Box<dyn Write>>>;

/// Runs `write` with a writer to `path` (`-`: standard output). `None` when standard output
/// was closed by its reader (`| head`): not an error, the reader wanted no more.
pub fn write_trace<T>(
    path: &Path,
    force: bool,
    format: TraceFormat,
    write: impl FnOnce(Out) -> Result<T, WriteError>,
) -> Result<Option<T>> {
    if is_stdout(path) {
        let out: Box<dyn Write> = Box::new(io::stdout().lock());
        return match write(TraceWriter::new(BufWriter::new(out), format)) {
            Err(WriteError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(None),
            other => other.map(Some).context("writing standard output"),
        };
    }
    let pending = PendingFile::create(path, force)?;
    let file: Box<dyn Write> = Box::new(pending.file.try_clone()?);
    let done =
        write(TraceWriter::new(BufWriter::new(file), format)).with_context(|| format!("writing {}", path.display()))?;
    pending.commit(force)?;
    Ok(Some(done))
}

/// Whether `path` names standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How a summary names the output.
pub fn name(path: &Path) -> String {
    if is_stdout(path) {
        "standard output".to_string()
    } else {
        path.display().to_string()
    }
}
