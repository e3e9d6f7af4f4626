//! The keyword arguments of `sonde.analyze`, `sonde.stream` and `sonde.monitor`, checked as
//! `sonde analyze` checks its flags (the same rules, the same messages) and turned into a
//! [`Run`]. The Python facade gives every option its default; this side only checks.

use std::path::PathBuf;

use pyo3::prelude::*;
use sonde_define::{parse_change_file, parse_definitions, Counter};
use sonde_engine::{Filter, Pipeline, Run, ThinConfig, Thinner};
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
        let workers = match self.threads {
            Some(n) if !(1..=sonde_engine::MAX_WORKERS).contains(&n) => {
                return Err(settings_error(format!("threads must be from 1 to {}", sonde_engine::MAX_WORKERS)))
            }
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let internal_nets = self.internal_nets()?;
        let interval_ns = self.interval_ns()?;
        let interval_cfg = interval_ns.map(|interval_ns| sonde_stats::Config {
            interval_ns,
            internal_nets: internal_nets.clone(),
            tables: self.tables,
            table_cap: self.table_size.max(1),
            top_n: self.top,
        });
        let flow = FlowConfig {
            tcp_idle_ns: timeout_ns(self.tcp_timeout, "tcp_timeout")?,
            udp_idle_ns: timeout_ns(self.udp_timeout, "udp_timeout")?,
            tcp_closed_linger_ns: timeout_ns(self.closed_linger, "closed_linger")?,
            max_flows: self.max_flows.max(1),
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
            Some(path) => Some(load_definitions(path, interval_ns, self.definition_fids)?),
            None if self.definition_changes.is_some() => {
                return Err(settings_error("definition_changes needs definitions"));
            }
            None => None,
        };
        if let (Some(counter), Some(path)) = (counter.as_mut(), &self.definition_changes) {
            let text = read(path, "reading definition changes")?;
            let changes = parse_change_file(&text).map_err(|e| settings_error(format!("{}: {e}", path.display())))?;
            counter.schedule(changes);
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
        if self.interval == 0.0 {
            return Ok(None);
        }
        if !self.interval.is_finite() || self.interval < 0.001 {
            return Err(settings_error(format!(
                "interval must be 0 (off) or at least 0.001 seconds, not {}",
                self.interval
            )));
        }
        Ok(Some((self.interval * 1e9).round() as u64))
    }

    /// `internal` and the lines of `internal_file`, as `--internal` and `--internal-file` read them.
    fn internal_nets(&self) -> PyResult<Vec<ipnet::IpNet>> {
        let mut nets = Vec::new();
        for s in &self.internal {
            nets.push(parse_net(s).map_err(|e| settings_error(format!("internal {s}: {e}")))?);
        }
        if let Some(path) = &self.internal_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| settings_error(format!("cannot read {}: {e}", path.display())))?;
            for (i, line) in text.lines().enumerate() {
                let line = line.split('#').next().unwrap_or("").trim();
                if !line.is_empty() {
                    let net =
                        parse_net(line).map_err(|e| settings_error(format!("{}:{}: {e}", path.display(), i + 1)))?;
                    nets.push(net);
                }
            }
        }
        Ok(nets)
    }
}

/// "a.b.c.d/len", "a.b.c.d/m.m.m.m" (Tstat's net.conf), an IPv6 prefix, or a bare address: the
/// forms `--internal` takes (the binary's parser, which no library holds yet).
fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    if let Ok(net) = s.parse::<ipnet::IpNet>() {
        return Ok(net.trunc());
    }
    if let Some((addr, mask)) = s.split_once('/') {
        let addr: std::net::Ipv4Addr = addr.trim().parse().map_err(|_| "not an IPv4 address".to_string())?;
        let mask: std::net::Ipv4Addr = mask.trim().parse().map_err(|_| "not a prefix length or netmask".to_string())?;
        let net = ipnet::Ipv4Net::with_netmask(addr, mask).map_err(|e| e.to_string())?;
        return Ok(ipnet::IpNet::V4(net.trunc()));
    }
    let addr: std::net::IpAddr = s.trim().parse().map_err(|_| "not an address or network".to_string())?;
    Ok(ipnet::IpNet::from(addr))
}

fn timeout_ns(secs: f64, name: &str) -> PyResult<u64> {
    if !(secs.is_finite() && secs > 0.0) {
        return Err(settings_error(format!("{name} must be a positive number of seconds")));
    }
    Ok((secs * 1e9) as u64)
}

fn read(path: &std::path::Path, what: &str) -> PyResult<String> {
    std::fs::read_to_string(path).map_err(|e| settings_error(format!("{what} {}: {e}", path.display())))
}

/// A definitions file, parsed and compiled, as `--definitions` loads it.
fn load_definitions(path: &std::path::Path, interval_ns: Option<u64>, max_fids: usize) -> PyResult<Counter> {
    let text = read(path, "reading definitions")?;
    let defs = parse_definitions(&text).map_err(|e| settings_error(format!("{}: {e}", path.display())))?;
    if defs.is_empty() {
        return Err(settings_error(format!("{}: no definition in the file", path.display())));
    }
    Ok(Counter::new(defs, interval_ns, max_fids))
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
