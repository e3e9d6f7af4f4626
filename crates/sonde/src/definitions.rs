//! `analyze --definitions FILE`: flows defined on demand (docs/definitions.md), counted per
//! interval and FID into `definitions.tsv`, with totals in summary.json.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use sonde_define::{parse_definitions, Counter};

pub const FILE: &str = "definitions.tsv";

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

/// One definition's totals, for summary.json.
#[derive(Debug, Serialize)]
pub struct DefinitionSummary {
    pub name: String,
    pub definition: String,
    pub packets: u64,
    pub bytes: u64,
    /// Rows of definitions.tsv: distinct FIDs summed over the intervals.
    pub fid_rows: u64,
    /// Packets counted in an overflow row (their FID found the interval's table full).
    pub overflow_packets: u64,
}

/// Writes definitions.tsv into `dir`; returns the totals.
pub fn write(counter: &Counter, dir: &Path) -> Result<Vec<DefinitionSummary>> {
    let mut text = String::new();
    counter.write_tsv(&mut text);
    let path = dir.join(FILE);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(counter
        .totals()
        .into_iter()
        .map(|t| DefinitionSummary {
            name: t.name,
            definition: t.text,
            packets: t.traffic.packets,
            bytes: t.traffic.bytes,
            fid_rows: t.fid_rows,
            overflow_packets: t.overflow_packets,
        })
        .collect())
}
