//! `analyze --definitions FILE`: flows defined on demand (docs/definitions.md), counted per
//! interval and FID into `definitions.tsv`, with totals in summary.json.

use std::path::Path;

use anyhow::{Context, Result};
use sonde_define::{parse_definitions, Change, Counter, ScheduledChange};
use sonde_output::OutputFile;

pub const FILE: &str = OutputFile::Definitions.name();
/// Written when a definition asks for `gap`, and for `length`.
pub const GAP_FILES: [&str; 2] = [OutputFile::DefinitionGaps.name(), OutputFile::DefinitionGapHistogram.name()];
pub const FLOWS_FILE: &str = OutputFile::DefinitionFlows.name();
/// Written when the file has associations.
pub const ASSOC_FILE: &str = OutputFile::DefinitionAssociations.name();

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
    let mut changes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: &str| anyhow::anyhow!("{}: line {}: {what}", path.display(), i + 1);
        let mut parts = line.splitn(4, char::is_whitespace);
        let (Some(time), Some(version), Some(op), Some(rest)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected TIME VERSION add|replace|remove WHAT"));
        };
        let at_ns = epoch_ns(time).ok_or_else(|| bad("TIME is epoch seconds, up to nine decimals"))?;
        let version: u64 = version.parse().map_err(|_| bad("VERSION is a whole number"))?;
        let change = match op {
            "add" => Change::Add(rest.trim().to_string()),
            "replace" => Change::Replace(rest.trim().to_string()),
            "remove" => Change::Remove(rest.trim().to_string()),
            _ => return Err(bad("the change is add, replace or remove")),
        };
        changes.push(ScheduledChange { at_ns, expected_version: version, change });
    }
    Ok(changes)
}

/// `SECONDS[.FRACTION]` in ns, exactly (a float would round it).
fn epoch_ns(text: &str) -> Option<u64> {
    let (s, frac) = text.split_once('.').unwrap_or((text, ""));
    if frac.len() > 9 || !s.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) || s.is_empty() {
        return None;
    }
    let frac_ns: u64 = format!("{frac:0<9}").parse().ok()?;
    s.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// What became of a scheduled change, and one definition's totals, for summary.json.
pub use sonde_output::summary::{ChangeSummary, DefinitionSummary};

pub fn change_log(counter: &Counter) -> Vec<ChangeSummary> {
    ChangeSummary::log(counter)
}

/// What each definition (not the associations) counted so far.
pub fn summaries(counter: &Counter) -> Vec<DefinitionSummary> {
    DefinitionSummary::all(counter)
}

/// Writes definitions.tsv (and the gap and flow files the definitions ask for) into `dir`;
/// returns the names written and the totals.
pub fn write(counter: &Counter, dir: &Path) -> Result<(Vec<&'static str>, Vec<DefinitionSummary>)> {
    let mut names = Vec::new();
    for (file, text) in sonde_output::definition_files(counter) {
        let path = dir.join(file.name());
        sonde_output::write_atomic(&path, |w| w.write_all(text.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))?;
        names.push(file.name());
    }
    Ok((names, summaries(counter)))
}
