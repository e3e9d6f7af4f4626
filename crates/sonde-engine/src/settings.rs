//! The checks of a run's settings that every front end makes: the command line's flags, the
//! Python binding's keyword arguments. One rule and one message each, in one place; the caller
//! names the option as its users spell it (`--tcp-timeout` on the command line, `tcp_timeout`
//! in Python).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use ipnet::{IpNet, Ipv4Net};
use sonde_define::{parse_change_file, parse_definitions, Counter, Definition, ScheduledChange};

use crate::MAX_WORKERS;

/// Most flows held at once: the flow table indexes its slots with 32 bits.
pub const MAX_FLOWS: usize = 1 << 30;

/// A setting that cannot be used, and why, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError(String);

impl SettingsError {
    fn new(message: impl Into<String>) -> SettingsError {
        SettingsError(message.into())
    }

    /// The same error, `what` before it (`--internal 10.0.0.0/33: …`).
    fn context(self, what: impl std::fmt::Display) -> SettingsError {
        SettingsError(format!("{what}: {}", self.0))
    }
}

sonde_types::message_error!(SettingsError);

/// A network as `--internal` takes it: `a.b.c.d/len`, `a.b.c.d/m.m.m.m` (Tstat's net.conf), an
/// IPv6 prefix, or a bare address (a /32 or /128); host bits are cleared.
pub fn parse_net(s: &str) -> Result<IpNet, SettingsError> {
    if let Ok(net) = s.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    if let Some((addr, mask)) = s.split_once('/') {
        let addr: Ipv4Addr = addr.trim().parse().map_err(|_| SettingsError::new("not an IPv4 address"))?;
        let mask: Ipv4Addr = mask.trim().parse().map_err(|_| SettingsError::new("not a prefix length or netmask"))?;
        let net = Ipv4Net::with_netmask(addr, mask).map_err(|_| SettingsError::new("netmask is not contiguous"))?;
        return Ok(IpNet::V4(net.trunc()));
    }
    let addr: IpAddr = s.trim().parse().map_err(|_| SettingsError::new("not an address or network"))?;
    Ok(IpNet::from(addr))
}

/// The internal networks: each of `list` (the option `name`), then each line of `file`
/// (Tstat's net.conf: one network a line, `#` comments).
pub fn internal_nets(list: &[String], file: Option<&Path>, name: &str) -> Result<Vec<IpNet>, SettingsError> {
    let mut nets = Vec::new();
    // An empty entry (`--internal ""`, a file's `internal = [""]`) names no network.
    for s in list.iter().filter(|s| !s.trim().is_empty()) {
        nets.push(parse_net(s).map_err(|e| e.context(format_args!("{name} {s}")))?);
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SettingsError::new(format!("cannot read {}: {e}", path.display())))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if !line.is_empty() {
                nets.push(parse_net(line).map_err(|e| e.context(format_args!("{}:{}", path.display(), i + 1)))?);
            }
        }
    }
    Ok(nets)
}

/// The monitoring interval in nanoseconds: `None` for 0 (off), else at least a millisecond.
pub fn interval_ns(secs: f64, name: &str) -> Result<Option<u64>, SettingsError> {
    if secs == 0.0 {
        return Ok(None);
    }
    if !secs.is_finite() || secs < 0.001 {
        return Err(SettingsError::new(format!("{name} must be 0 (off) or at least 0.001 seconds, not {secs}")));
    }
    Ok(Some((secs * 1e9).round() as u64))
}

/// A timeout in nanoseconds: a positive number of seconds.
pub fn timeout_ns(secs: f64, name: &str) -> Result<u64, SettingsError> {
    if !(secs.is_finite() && secs > 0.0) {
        return Err(SettingsError::new(format!("{name} must be a positive number of seconds")));
    }
    Ok((secs * 1e9) as u64)
}

/// The flow-tracking workers: 1 to [`MAX_WORKERS`], the machine's cores when not given.
pub fn workers(threads: Option<usize>, name: &str) -> Result<usize, SettingsError> {
    match threads {
        Some(n) if !(1..=MAX_WORKERS).contains(&n) => {
            Err(SettingsError::new(format!("{name} must be from 1 to {MAX_WORKERS}")))
        }
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// Flows held at once: 1 to [`MAX_FLOWS`] (0 would split every flow).
pub fn max_flows(n: usize, name: &str) -> Result<usize, SettingsError> {
    if !(1..=MAX_FLOWS).contains(&n) {
        return Err(SettingsError::new(format!(
            "{name} must be from 1 to {MAX_FLOWS} (about 0.9 KB of address space each)"
        )));
    }
    Ok(n)
}

fn read(path: &Path, what: &str) -> Result<String, SettingsError> {
    std::fs::read_to_string(path).map_err(|e| SettingsError::new(format!("{what} {}: {e}", path.display())))
}

/// A definitions file (docs/definitions.md): its text and its definitions, at least one, named
/// in at most `max_name` bytes; a refused line is an error naming the file, line and column.
pub fn read_definitions(path: &Path, max_name: usize) -> Result<(String, Vec<Definition>), SettingsError> {
    let text = read(path, "reading definitions")?;
    let defs =
        parse_definitions(&text, max_name).map_err(|e| SettingsError::new(format!("{}: {e}", path.display())))?;
    if defs.is_empty() {
        return Err(SettingsError::new(format!("{}: no definition in the file", path.display())));
    }
    Ok((text, defs))
}

/// A definitions file, parsed and compiled into the counter a run takes.
pub fn load_definitions(
    path: &Path,
    interval_ns: Option<u64>,
    max_fids: usize,
    max_name: usize,
) -> Result<Counter, SettingsError> {
    let (_, defs) = read_definitions(path, max_name)?;
    let mut counter = Counter::new(defs, interval_ns, max_fids);
    counter.set_max_name_bytes(max_name);
    Ok(counter)
}

/// A definition change file: one change per line, applied when the packets reach its time
/// (`TIME VERSION add LINE`, `TIME VERSION replace LINE`, `TIME VERSION remove NAME`; TIME in
/// epoch seconds, VERSION the set's version the change was made against).
pub fn load_changes(path: &Path) -> Result<Vec<ScheduledChange>, SettingsError> {
    let text = read(path, "reading definition changes")?;
    parse_change_file(&text).map_err(|e| SettingsError::new(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        assert_eq!(parse_net("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_net("130.192.0.0/255.255.0.0").unwrap().to_string(), "130.192.0.0/16");
        assert_eq!(parse_net("fd77::/16").unwrap().to_string(), "fd77::/16");
        assert_eq!(parse_net("192.168.1.1").unwrap().to_string(), "192.168.1.1/32");
        assert_eq!(parse_net("10.0.0.0/255.0.255.0").unwrap_err().to_string(), "netmask is not contiguous");
        assert_eq!(parse_net("10.0.0.0/33").unwrap_err().to_string(), "not a prefix length or netmask");
        assert_eq!(parse_net("nonsense").unwrap_err().to_string(), "not an address or network");
        let e = internal_nets(&["10.0.0.0/8".into(), "x/8".into()], None, "--internal").unwrap_err();
        assert_eq!(e.to_string(), "--internal x/8: not an IPv4 address");
        let dir = std::env::temp_dir().join(format!("sonde-settings-{}", std::process::id()));
        std::fs::write(&dir, "# net.conf\n10.0.0.0/255.0.0.0\n\nfd00::/8 # v6\nbad\n").unwrap();
        let e = internal_nets(&[], Some(&dir), "internal").unwrap_err();
        assert_eq!(e.to_string(), format!("{}:5: not an address or network", dir.display()));
        std::fs::write(&dir, "10.0.0.0/255.0.0.0\nfd00::/8\n").unwrap();
        let nets = internal_nets(&["192.0.2.1".into()], Some(&dir), "internal").unwrap();
        assert_eq!(nets.iter().map(|n| n.to_string()).collect::<Vec<_>>(), ["192.0.2.1/32", "10.0.0.0/8", "fd00::/8"]);
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn numbers() {
        assert_eq!(interval_ns(0.0, "--interval"), Ok(None));
        assert_eq!(interval_ns(0.25, "--interval"), Ok(Some(250_000_000)));
        let e = interval_ns(0.0001, "interval").unwrap_err().to_string();
        assert_eq!(e, "interval must be 0 (off) or at least 0.001 seconds, not 0.0001");
        assert!(interval_ns(f64::NAN, "interval").is_err());
        assert_eq!(timeout_ns(1.5, "--tcp-timeout"), Ok(1_500_000_000));
        for bad in [0.0, -1.0, f64::INFINITY] {
            assert_eq!(
                timeout_ns(bad, "tcp_timeout").unwrap_err().to_string(),
                "tcp_timeout must be a positive number of seconds"
            );
        }
        assert_eq!(workers(Some(3), "threads"), Ok(3));
        assert!(workers(None, "threads").unwrap() >= 1);
        assert!(workers(Some(0), "threads").is_err() && workers(Some(MAX_WORKERS + 1), "threads").is_err());
        assert_eq!(max_flows(1, "--max-flows"), Ok(1));
        assert!(max_flows(0, "--max-flows").is_err() && max_flows(MAX_FLOWS + 1, "--max-flows").is_err());
    }
}
