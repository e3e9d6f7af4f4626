//! `--anonymize MODE --key FILE`: the anonymizer every output's addresses go through (flow
//! logs, tables, definitions' address FIDs), and what summary.json says about it.

use std::path::Path;

use anyhow::{Context, Result};
use sonde_anon::{Anonymizer, Key, Mode};

/// How the run's outputs were anonymised, for summary.json.
use sonde_output::summary::AnonSummary;

/// The anonymizer `mode` asks for, under the key in `key` (created 0600 if absent).
/// `max_addresses` bounds tcpdpriv's table.
pub fn anonymizer(
    mode: Mode,
    key: Option<&Path>,
    max_addresses: usize,
    quiet: bool,
) -> Result<(Anonymizer, AnonSummary)> {
    let Some(path) = key.filter(|_| mode.needs_key()) else {
        anyhow::ensure!(!mode.needs_key(), "--anonymize {mode} needs --key FILE (created with a new key if absent)");
        let summary = AnonSummary { mode: mode.name(), key_file: None, key_created: false, tcpdpriv: None };
        return Ok((Anonymizer::zero(), summary));
    };
    let loaded = Key::load_or_create(path).with_context(|| format!("key file {}", path.display()))?;
    if !quiet {
        if loaded.created {
            eprintln!("sonde: created key file {} (mode 600): keep it to join later runs' outputs", path.display());
        }
        if let Some(bits) = loaded.loose_mode {
            eprintln!(
                "sonde: warning: key file {} is readable by others (mode {bits:o}): chmod 600 it",
                path.display()
            );
        }
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

/// The tcpdpriv table's figures for summary.json (after the run), with a warning when it was
/// full: images given stay, later addresses became 0.0.0.0 or ::.
pub fn table_summary(anon: &Anonymizer, quiet: bool) -> Option<sonde_output::summary::TcpdprivSummary> {
    let table = anon.table_stats()?;
    if table.unmapped > 0 && !quiet {
        eprintln!(
            "sonde: warning: the tcpdpriv table was full (--tcpdpriv-max-addresses {}): {} lookups of new addresses gave 0.0.0.0 or ::",
            table.max_addresses, table.unmapped
        );
    }
    Some(sonde_output::summary::TcpdprivSummary {
        addresses: table.addresses,
        max_addresses: table.max_addresses,
        unmapped: table.unmapped,
    })
}

/// Parses `--anonymize`'s value.
pub fn parse_mode(text: &str) -> Result<Mode, String> {
    text.parse().map_err(|e: sonde_anon::UnknownMode| e.to_string())
}
