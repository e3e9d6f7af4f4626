//! `analyze --definitions FILE` and `--definition-changes FILE`: the files read into the
//! counter the run takes (docs/definitions.md).

use std::path::Path;

use anyhow::{Context, Result};
use sonde_define::{parse_change_file, parse_definitions, Counter, ScheduledChange};

/// A definitions file, parsed and compiled; a refused line is an error naming the file, line and
/// column.
pub fn load(path: &Path, interval_ns: Option<u64>, max_fids: usize) -> Result<Counter> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading definitions {}", path.display()))?;
    let defs = parse_definitions(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if defs.is_empty() {
        anyhow::bail!("{}: no definition in the file", path.display());
    }
    Ok(Counter::new(defs, interval_ns, max_fids))
}

/// `--definition-changes FILE`: one change per line, applied when the packets reach its time:
/// `TIME VERSION add LINE`, `TIME VERSION replace LINE`, `TIME VERSION remove NAME`, where
/// TIME is in epoch seconds and VERSION the set's version the change was made against.
pub fn load_changes(path: &Path) -> Result<Vec<ScheduledChange>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading definition changes {}", path.display()))?;
    parse_change_file(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
