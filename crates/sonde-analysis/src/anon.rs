//! `--anonymize MODE --key FILE`: the anonymizer every output's addresses go through (flow
//! logs, tables, definitions' address FIDs), and what summary.json says about it.

use std::path::Path;

use anyhow::{Context, Result};
use sonde_anon::{Anonymizer, Key, Mode};
use sonde_output::summary::{AnonSummary, TcpdprivSummary};

use crate::AnalysisConfig;

/// The anonymizer `mode` asks for under `config`'s key (created 0600 if absent); what the user
/// should know about the key goes to `notes`.
pub fn anonymizer(config: &AnalysisConfig, mode: Mode, notes: &mut Vec<String>) -> Result<(Anonymizer, AnonSummary)> {
    let Some(path) = config.key.as_deref().filter(|_| mode.needs_key()) else {
        anyhow::ensure!(
            !mode.needs_key(),
            "{} {mode} needs {} FILE (created with a new key if absent)",
            config.name("anonymize"),
            config.name("key")
        );
        let summary = AnonSummary { mode: mode.name(), key_file: None, key_created: false, tcpdpriv: None };
        return Ok((Anonymizer::zero(), summary));
    };
    keyed(mode, path, config.tcpdpriv_max_addresses, notes)
}

/// The anonymizer of `mode` under the key in `path` (created 0600 if absent); `max_addresses`
/// bounds tcpdpriv's table (`sonde anon` too).
pub fn keyed(
    mode: Mode,
    path: &Path,
    max_addresses: usize,
    notes: &mut Vec<String>,
) -> Result<(Anonymizer, AnonSummary)> {
    let loaded = Key::load_or_create(path).with_context(|| format!("key file {}", path.display()))?;
    if loaded.created {
        notes.push(format!("created key file {} (mode 600): keep it to join later runs' outputs", path.display()));
    }
    if let Some(bits) = loaded.loose_mode {
        notes.push(format!("warning: key file {} is readable by others (mode {bits:o}): chmod 600 it", path.display()));
    }
    let summary = AnonSummary {
        mode: mode.name(),
        key_file: Some(path.display().to_string()),
        key_created: loaded.created,
        tcpdpriv: None,
    };
    let anon = match mode {
        Mode::Tcpdpriv => Anonymizer::tcpdpriv(&loaded.key, max_addresses),
        _ => Anonymizer::new(mode, &loaded.key),
    };
    Ok((anon, summary))
}

/// The tcpdpriv table's figures for summary.json (after the run).
pub fn table_summary(anon: &Anonymizer) -> Option<TcpdprivSummary> {
    let table = anon.table_stats()?;
    Some(TcpdprivSummary { addresses: table.addresses, max_addresses: table.max_addresses, unmapped: table.unmapped })
}

/// The warning a full tcpdpriv table deserves: images given stay, later addresses became
/// 0.0.0.0 or ::.
pub fn table_warning(table: &TcpdprivSummary) -> Option<String> {
    (table.unmapped > 0).then(|| {
        format!(
            "warning: the tcpdpriv table was full (--tcpdpriv-max-addresses {}): {} lookups of new addresses gave 0.0.0.0 or ::",
            table.max_addresses, table.unmapped
        )
    })
}

/// Parses `--anonymize`'s value.
pub fn parse_mode(text: &str) -> Result<Mode, sonde_anon::UnknownMode> {
    text.parse()
}
