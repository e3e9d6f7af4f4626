//! `analyze --definitions FILE`: flows defined on demand (docs/definitions.md), counted per
//! interval and FID into `definitions.tsv`, with totals in summary.json.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use sonde_define::{parse_change_file, parse_definitions, Change, Counter, ScheduledChange};
use sonde_types::{DefinitionEntry, DefinitionSummary};

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

/// `--definition-changes FILE`: one change per line, applied when the packets reach its time:
/// `TIME VERSION add LINE`, `TIME VERSION replace LINE`, `TIME VERSION remove NAME`, where
/// TIME is in epoch seconds and VERSION the set's version the change was made against.
pub fn load_changes(path: &Path) -> Result<Vec<ScheduledChange>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading definition changes {}", path.display()))?;
    parse_change_file(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// What became of a scheduled change, for summary.json.
#[derive(Debug, Serialize)]
pub struct ChangeSummary {
    pub at_s: f64,
    pub change: String,
    /// `applied` (with the new version) or why not.
    pub result: String,
    pub version: Option<u64>,
}

pub fn change_log(counter: &Counter) -> Vec<ChangeSummary> {
    counter
        .change_log()
        .iter()
        .map(|o| ChangeSummary {
            at_s: o.at_ns as f64 / 1e9,
            change: match &o.change {
                Change::Add(l) => format!("add {l}"),
                Change::Replace(l) => format!("replace {l}"),
                Change::Remove(n) => format!("remove {n}"),
            },
            result: match &o.result {
                Ok(_) => "applied".to_string(),
                Err(e) => e.to_string(),
            },
            version: o.result.as_ref().ok().copied(),
        })
        .collect()
}

/// What each definition (not the associations) counted so far.
pub fn summaries(counter: &Counter) -> Vec<DefinitionEntry> {
    counter
        .totals()
        .into_iter()
        .filter(|t| !t.association)
        .map(|t| DefinitionEntry {
            summary: DefinitionSummary {
                name: t.name,
                definition: t.text,
                version: t.version,
                retired: t.retired,
                packets: t.traffic.packets,
                bytes: t.traffic.bytes,
            },
            fid_rows: t.fid_rows,
            overflow_packets: t.overflow_packets,
            untracked_packets: t.untracked_packets,
        })
        .collect()
}

/// Writes definitions.tsv (and the gap and flow files the definitions ask for) into `dir`;
/// returns the names written and the totals.
pub fn write(counter: &Counter, dir: &Path) -> Result<(Vec<&'static str>, Vec<DefinitionEntry>)> {
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
    let totals = summaries(counter);
    Ok((names, totals))
}
