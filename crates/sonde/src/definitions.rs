//! `analyze --definitions FILE`: flows defined on demand (docs/definitions.md), counted per
//! interval and FID into `definitions.tsv`, with totals in summary.json.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use sonde_define::{parse_definitions, Counter};

pub const FILE: &str = "definitions.tsv";
/// Written when a definition asks for `gap`, and for `length`.
pub const GAP_FILES: [&str; 2] = ["definition_gaps.tsv", "definition_gap_histogram.tsv"];
pub const FLOWS_FILE: &str = "definition_flows.tsv";
/// Written when the file has associations.
pub const ASSOC_FILE: &str = "definition_associations.tsv";

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
    /// Packets `gap` and `length` did not follow (their table of FIDs was full).
    pub untracked_packets: u64,
}

/// Writes definitions.tsv (and the gap and flow files the definitions ask for) into `dir`;
/// returns the names written and the totals.
pub fn write(counter: &Counter, dir: &Path) -> Result<(Vec<&'static str>, Vec<DefinitionSummary>)> {
    let file = |name: &str, body: &dyn Fn(&mut String)| -> Result<()> {
        let mut text = String::new();
        body(&mut text);
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    let mut names = vec![FILE];
    file(FILE, &|out| counter.write_tsv(out))?;
    let (gap, length, associations) = counter.wants();
    if gap {
        file(GAP_FILES[0], &|out| counter.write_gaps(out))?;
        file(GAP_FILES[1], &|out| counter.write_gap_histogram(out))?;
        names.extend(GAP_FILES);
    }
    if length {
        file(FLOWS_FILE, &|out| counter.write_flows(out))?;
        names.push(FLOWS_FILE);
    }
    if associations {
        file(ASSOC_FILE, &|out| counter.write_associations(out))?;
        names.push(ASSOC_FILE);
    }
    let totals = counter
        .totals()
        .into_iter()
        .filter(|t| !t.association)
        .map(|t| DefinitionSummary {
            name: t.name,
            definition: t.text,
            packets: t.traffic.packets,
            bytes: t.traffic.bytes,
            fid_rows: t.fid_rows,
            overflow_packets: t.overflow_packets,
            untracked_packets: t.untracked_packets,
        })
        .collect();
    Ok((names, totals))
}
