//! The keyword arguments of `sonde.analyze`, `sonde.stream` and `sonde.monitor`, checked by the
//! rules `sonde analyze` checks its flags with (`sonde_engine::settings`: one definition, the
//! options named as Python spells them) and turned into a [`Run`]. The Python facade gives every
//! option its default; this side only checks.

use std::path::PathBuf;

use pyo3::prelude::*;
use sonde_engine::{settings, Filter, Pipeline, Run, ThinConfig, Thinner};
use sonde_flow::FlowConfig;
use sonde_output::summary::AnonSummary;

use crate::errors::settings_error;

/// The options as the facade hands them over (a dict, every key present).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Options {
    threads: Option<usize>,
    interval: f64,
    tables: bool,
    table_size: usize,
    top: usize,
    internal: Vec<String>,
    internal_file: Option<PathBuf>,
    definitions: Option<PathBuf>,
    definition_changes: Option<PathBuf>,
    definition_fids: usize,
    tcp_timeout: f64,
    udp_timeout: f64,
    closed_linger: f64,
    max_flows: usize,
    filter: Option<String>,
    anonymize: Option<String>,
    key: Option<PathBuf>,
    thin: bool,
    app_packets: u8,
    dns_cache: usize,
}

/// A run ready to read its first packet, and what its summary says about its settings.
pub struct Prepared {
    pub run: Run,
    pub interval_cfg: Option<sonde_stats::Config>,
    pub filter: Option<String>,
    pub anonymizer: Option<sonde_anon::Anonymizer>,
    pub anon_summary: Option<AnonSummary>,
    /// `definition_changes` was given: the summary lists what became of each.
    pub has_changes: bool,
}

impl Options {
    /// The run these options ask for, or the CLI's message for the first one that is wrong.
    pub fn prepare(&self) -> PyResult<Prepared> {
        let workers = settings::workers(self.threads, "threads").map_err(checked)?;
        let internal_nets =
            settings::internal_nets(&self.internal, self.internal_file.as_deref(), "internal").map_err(checked)?;
        let interval_ns = self.interval_ns()?;
        let interval_cfg = interval_ns.map(|interval_ns| sonde_stats::Config {
            interval_ns,
            internal_nets: internal_nets.clone(),
            tables: self.tables,
            table_cap: self.table_size.max(1),
            top_n: self.top,
        });
        let flow = FlowConfig {
            tcp_idle_ns: settings::timeout_ns(self.tcp_timeout, "tcp_timeout").map_err(checked)?,
            udp_idle_ns: settings::timeout_ns(self.udp_timeout, "udp_timeout").map_err(checked)?,
            tcp_closed_linger_ns: settings::timeout_ns(self.closed_linger, "closed_linger").map_err(checked)?,
            max_flows: settings::max_flows(self.max_flows, "max_flows").map_err(checked)?,
            internal_nets,
            app_facts: self.app_packets > 0,
            ..FlowConfig::default()
        };
        let app = sonde_engine::AppConfig {
            packets: self.app_packets,
            dns_cache: self.dns_cache,
            udp_idle_ns: flow.udp_idle_ns,
        };
        let thin = match self.thin {
            true => Some(Thinner::new(&ThinConfig::default()).map_err(|e| settings_error(format!("thin: {e}")))?),
            false => None,
        };
        let filter = self.filter.clone().filter(|f| !f.trim().is_empty());
        if let Some(expr) = &filter {
            Filter::new(expr).map_err(|e| settings_error(e.to_string()))?;
        }
        let mut counter = match &self.definitions {
            Some(path) => Some(settings::load_definitions(path, interval_ns, self.definition_fids).map_err(checked)?),
            None if self.definition_changes.is_some() => {
                return Err(settings_error("definition_changes needs definitions"));
            }
            None => None,
        };
        if let (Some(counter), Some(path)) = (counter.as_mut(), &self.definition_changes) {
            counter.schedule(settings::load_changes(path).map_err(checked)?);
        }
        if self.key.is_some() && self.anonymize.is_none() {
            return Err(settings_error("key needs anonymize"));
        }
        let (anonymizer, anon_summary) = match &self.anonymize {
            Some(mode) => {
                let (a, s) = anonymizer(mode, self.key.as_ref())?;
                (Some(a), Some(s))
            }
            None => (None, None),
        };
        let run = Run::new()
            .pipeline(Pipeline { flow, workers, thin, app, ..Pipeline::default() })
            .filter(filter.clone())
            .intervals(interval_cfg.clone())
            .definitions(counter)
            .anonymize(anonymizer.clone())
            .map_err(|e| settings_error(e.to_string()))?;
        Ok(Prepared {
            run,
            interval_cfg,
            filter,
            anonymizer,
            anon_summary,
            has_changes: self.definition_changes.is_some(),
        })
    }

    /// The monitoring interval, `None` when off.
    pub fn interval_ns(&self) -> PyResult<Option<u64>> {
        settings::interval_ns(self.interval, "interval").map_err(checked)
    }
}

/// A setting refused by the rules every front end shares.
fn checked(e: settings::SettingsError) -> PyErr {
    settings_error(e.to_string())
}

/// The anonymizer of `--anonymize MODE --key FILE` (the key file created 0600 if absent).
fn anonymizer(mode: &str, key: Option<&PathBuf>) -> PyResult<(sonde_anon::Anonymizer, AnonSummary)> {
    let mode: sonde_anon::Mode = mode.parse().map_err(|e: sonde_anon::UnknownMode| settings_error(e.to_string()))?;
    let Some(path) = key.filter(|_| mode.needs_key()) else {
        if mode.needs_key() {
            return Err(settings_error(format!("anonymize {mode} needs key=FILE (created with a new key if absent)")));
        }
        return Ok((
            sonde_anon::Anonymizer::zero(),
            AnonSummary { mode: mode.name(), key_file: None, key_created: false, tcpdpriv: None },
        ));
    };
    let loaded = sonde_anon::Key::load_or_create(path)
        .map_err(|e| settings_error(format!("key file {}: {e}", path.display())))?;
    let summary = AnonSummary {
        mode: mode.name(),
        key_file: Some(path.display().to_string()),
        key_created: loaded.created,
        tcpdpriv: None,
    };
    Ok((sonde_anon::Anonymizer::new(mode, &loaded.key), summary))
}
