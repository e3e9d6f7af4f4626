//! `sonde monitor`'s controls: operators' definition changes (from the HTTP API) travel to the
//! reader, which applies them at the packet they reach; SIGHUP turns the definitions file into
//! such changes and reloads the internal networks; with `--kafka-control`, each new version of
//! the control topic does the same ([`ControlLink`], docs/kafka.md "Control topic").

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Receiver;
use sonde_define::{Change, Counter};
use sonde_engine::{Controls, Edit};
use sonde_kafka::control::{ControlMessage, Followed, StatusReport, StatusSender};

/// A reader's controls: the API's edits, and what SIGHUP reloads.
pub struct Hooks {
    edits: Receiver<Edit>,
    /// Changes a reload made, applied before the API's.
    queued: VecDeque<Edit>,
    reload: Option<Arc<Reloader>>,
    /// The reloads this reader has applied, and the internal networks one brought.
    reloads_seen: u64,
    new_nets: Option<Vec<ipnet::IpNet>>,
    quiet: bool,
    /// `--kafka-control`: the control topic's versions, and the one whose edits were queued at
    /// the last drain.
    control: Option<Arc<ControlLink>>,
    awaiting: Option<Queued>,
}

/// A control version's edits, queued: they are the change log's entries from `log_start` on.
struct Queued {
    version: u64,
    log_start: usize,
    edits: usize,
}

impl Hooks {
    pub fn new(edits: Receiver<Edit>, reload: Option<Arc<Reloader>>, quiet: bool) -> Hooks {
        Hooks {
            edits,
            queued: VecDeque::new(),
            reload,
            reloads_seen: 0,
            new_nets: None,
            quiet,
            control: None,
            awaiting: None,
        }
    }

    /// Also applies the control topic's versions (one reader only: the one counting definitions).
    pub fn with_control(mut self, control: Arc<ControlLink>) -> Hooks {
        self.control = Some(control);
        self
    }

    /// The control topic's part of a drain: settles the version whose edits the last drain
    /// applied, then turns the newest version waiting into edits, all or none.
    fn control_at_drain(&mut self, counter: &Counter) {
        let Some(link) = self.control.clone() else { return };
        if let Some(q) = self.awaiting.take() {
            let log = counter.change_log();
            match log.get(q.log_start..q.log_start + q.edits) {
                Some(done) if done.iter().all(|o| o.result.is_ok()) => {
                    link.applied(q.version, done.first().map(|o| o.at_ns), counter.version())
                }
                Some(done) => {
                    let why =
                        done.iter().find_map(|o| o.result.as_ref().err()).map_or(String::new(), |e| e.to_string());
                    link.failed(q.version, format!("partly applied: {why}"), counter.version())
                }
                None => link.failed(q.version, "not applied".to_string(), counter.version()),
            }
        }
        link.first_packet(counter.span_ns().map(|(first, _)| first), counter.version());
        let Some(message) = link.take_pending() else { return };
        let wanted = match counter.parse(&message.definitions) {
            Ok(defs) => defs.into_iter().map(|d| (d.name, d.text)).collect::<Vec<_>>(),
            Err(e) => return link.failed(message.version, e.to_string(), counter.version()),
        };
        let changes = match in_an_order_the_set_takes(counter, counter.changes_to(&wanted)) {
            Ok(changes) => changes,
            Err(e) => return link.failed(message.version, e, counter.version()),
        };
        if changes.is_empty() {
            // The set is already this version's: it applies from the newest packet.
            return link.applied(message.version, counter.span_ns().map(|(_, last)| last), counter.version());
        }
        // Queued before any API edit, and applied by this same drain: nothing comes between.
        self.awaiting =
            Some(Queued { version: message.version, log_start: counter.change_log().len(), edits: changes.len() });
        for (i, change) in changes.into_iter().enumerate() {
            self.queued.insert(i, Edit { expected_version: None, change, reply: Box::new(|_| {}) });
        }
    }
}

/// `changes` (a reload's order: additions and replacements, then removals) or, if the set
/// refuses that order, the removals first (an association that goes before a definition it
/// used is replaced); `Err`: why the set refuses both.
fn in_an_order_the_set_takes(counter: &Counter, changes: Vec<Change>) -> Result<Vec<Change>, String> {
    let refused = match dry_run(counter, &changes) {
        Ok(()) => return Ok(changes),
        Err(e) => e,
    };
    let (mut removals, others): (Vec<Change>, Vec<Change>) =
        changes.into_iter().partition(|c| matches!(c, Change::Remove(_)));
    removals.extend(others);
    match dry_run(counter, &removals) {
        Ok(()) => Ok(removals),
        Err(_) => Err(refused),
    }
}

/// Applies `changes` to a copy of the active set: the first refused says why, and nothing is
/// applied to the real one.
fn dry_run(counter: &Counter, changes: &[Change]) -> Result<(), String> {
    let active: Vec<String> = counter.listing().into_iter().filter(|t| !t.retired).map(|t| t.text).collect();
    let defs = counter.parse(&active.join("\n")).map_err(|e| format!("the set running: {e}"))?;
    let mut copy = Counter::new(defs, None, 1);
    copy.set_max_name_bytes(counter.max_name_bytes());
    for change in changes {
        copy.apply(copy.version(), change).map_err(|e| match change {
            Change::Add(line) => format!("adding `{}`: {e}", line.trim()),
            Change::Replace(line) => format!("replacing with `{}`: {e}", line.trim()),
            Change::Remove(name) => format!("removing `{name}`: {e}"),
        })?;
    }
    Ok(())
}

impl Controls for Hooks {
    /// After a SIGHUP (seen by any reader): the internal networks for the next drain, and the
    /// definitions file, read again, as changes against the set running now (the reader that
    /// counts them). A file that does not parse changes nothing (and says why).
    fn at_drain(&mut self, counter: Option<&Counter>) {
        if let Some(counter) = counter {
            self.control_at_drain(counter);
        }
        let Some(reloader) = self.reload.clone() else { return };
        let (generation, nets) = reloader.poll(!self.quiet);
        if generation == self.reloads_seen {
            return;
        }
        self.reloads_seen = generation;
        self.new_nets = nets.map(|n| n.to_vec());
        let say = !self.quiet;
        let (Some(counter), Some(path)) = (counter, &reloader.definitions) else { return };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return warn(say, format!("SIGHUP: reading {}: {e}; definitions unchanged", path.display())),
        };
        let wanted = match counter.parse(&text) {
            Ok(defs) => defs,
            Err(e) => return warn(say, format!("SIGHUP: {}: {e}; definitions unchanged", path.display())),
        };
        let changes = counter.changes_to(&wanted.iter().map(|d| (d.name.clone(), d.text.clone())).collect::<Vec<_>>());
        if changes.is_empty() {
            return warn(say, format!("SIGHUP: {} unchanged", path.display()));
        }
        for change in changes {
            let told = format!("{change:?}");
            self.queued.push_back(Edit {
                expected_version: None,
                change,
                reply: Box::new(move |result| match result {
                    Ok(v) => warn(say, format!("SIGHUP: {told}: now version {v}")),
                    Err(e) => warn(say, format!("SIGHUP: {told}: {e}")),
                }),
            });
        }
    }

    fn next_edit(&mut self) -> Option<Edit> {
        self.queued.pop_front().or_else(|| self.edits.try_recv().ok())
    }

    fn next_internal_nets(&mut self) -> Option<Vec<ipnet::IpNet>> {
        self.new_nets.take()
    }
}

/// What SIGHUP reloads: the definitions file and, with --internal-file, the internal networks.
/// Shared by every reader: the first to see the signal reads the files once.
pub struct Reloader {
    pub flag: &'static AtomicBool,
    pub definitions: Option<PathBuf>,
    /// Reads the internal networks again (`--internal` and `--internal-file`).
    pub internal_nets: Option<Box<dyn Fn() -> anyhow::Result<Vec<ipnet::IpNet>> + Send + Sync>>,
    /// Signals taken so far, and the networks the latest brought.
    taken: std::sync::Mutex<(u64, Option<Arc<Vec<ipnet::IpNet>>>)>,
}

impl Reloader {
    pub fn new(
        flag: &'static AtomicBool,
        definitions: Option<PathBuf>,
        internal_nets: Option<Box<dyn Fn() -> anyhow::Result<Vec<ipnet::IpNet>> + Send + Sync>>,
    ) -> Reloader {
        Reloader { flag, definitions, internal_nets, taken: Default::default() }
    }

    /// Takes a signal if one came (reading the internal networks then); returns how many have
    /// been taken and the networks of the latest (`None`: unchanged).
    fn poll(&self, say: bool) -> (u64, Option<Arc<Vec<ipnet::IpNet>>>) {
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        if self.flag.swap(false, Ordering::Relaxed) {
            taken.0 += 1;
            taken.1 = match self.internal_nets.as_ref().map(|read| read()) {
                Some(Ok(nets)) => {
                    warn(say, format!("SIGHUP: {} internal networks from the next drain on", nets.len()));
                    Some(Arc::new(nets))
                }
                Some(Err(e)) => {
                    warn(say, format!("SIGHUP: internal networks unchanged: {e:#}"));
                    None
                }
                None => None,
            };
        }
        taken.clone()
    }
}

fn warn(say: bool, message: String) {
    if say {
        eprintln!("sonde: {message}");
    }
}

/// The control topic's versions on their way to the reader, and what the probe reports: shared
/// by the follower thread (new versions), the reader's hooks (applied or refused), the HTTP
/// server and the summary.
pub struct ControlLink {
    pub probe: String,
    pub topic: String,
    pub status_topic: String,
    status: StatusSender,
    /// The newest version received and not yet taken by the reader.
    pending: Mutex<Option<ControlMessage>>,
    state: Mutex<ControlState>,
    limits: VersionLimits,
    quiet: bool,
}

/// What a version of the control topic may hold.
#[derive(Debug, Clone, Copy)]
pub struct VersionLimits {
    /// The most definitions (`--http-max-definitions`, a live monitor's bound).
    pub definitions: usize,
    /// The longest definition name, in bytes (`--definition-name-max`).
    pub name_bytes: usize,
}

/// What the probe applies and has applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControlState {
    /// The control version applied (0: none).
    pub version: u64,
    /// Packet time from which it counts (`None` before the first packet).
    pub since_ns: Option<u64>,
    /// The definition set's own version.
    pub definitions_version: u64,
    /// Versions applied while running, and refused.
    pub applied: u64,
    pub failed: u64,
    /// The newest version received (applied, refused or waiting).
    pub received: u64,
    pub last_error: Option<(u64, String)>,
}

impl ControlLink {
    /// The probe starts at `version` (0: none published, or the newest refused) of the control
    /// topic; `definitions_version` is its set's version (1 at start).
    pub fn new(
        probe: String,
        topic: String,
        status_topic: String,
        status: StatusSender,
        start: ControlState,
        limits: VersionLimits,
        quiet: bool,
    ) -> ControlLink {
        ControlLink {
            probe,
            topic,
            status_topic,
            status,
            pending: Mutex::new(None),
            state: Mutex::new(start),
            limits,
            quiet,
        }
    }

    /// The version the run starts with (read from the topic before the first packet).
    pub fn start_at(&self, version: u64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (state.version, state.received) = (version, version);
    }

    pub fn state(&self) -> ControlState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The follower's news: a version newer than any seen waits for the reader's next drain
    /// (a newer one replaces it); a value that is unreadable, or a file that does not parse, is
    /// refused at once.
    pub fn offer(&self, followed: Followed) {
        let message = match followed {
            Followed::Version(m) => m,
            Followed::Unreadable(e) => return self.refused(None, format!("control topic {}: {e}", self.topic)),
        };
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if message.version <= state.received.max(state.version) {
                return;
            }
            state.received = message.version;
        }
        if let Err(e) = self.check(&message.definitions) {
            return self.refused(Some(message.version), e);
        }
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    }

    /// A version's file: it parses, and holds at most `max_definitions`.
    pub(crate) fn check(&self, definitions: &str) -> Result<Vec<sonde_define::Definition>, String> {
        let defs = sonde_define::parse_definitions(definitions, self.limits.name_bytes).map_err(|e| e.to_string())?;
        if defs.len() > self.limits.definitions {
            return Err(format!(
                "{} definitions, more than a live monitor counts (--http-max-definitions {})",
                defs.len(),
                self.limits.definitions
            ));
        }
        Ok(defs)
    }

    fn take_pending(&self) -> Option<ControlMessage> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// `version` applies from packet time `since_ns`.
    fn applied(&self, version: u64, since_ns: Option<u64>, definitions_version: u64) {
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.version = version;
            state.since_ns = since_ns;
            state.definitions_version = definitions_version;
            state.applied += 1;
        }
        warn(!self.quiet, format!("control topic {}: version {version} applied", self.topic));
        self.report(None);
    }

    fn failed(&self, version: u64, why: String, definitions_version: u64) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).definitions_version = definitions_version;
        self.refused(Some(version), why);
    }

    /// A version refused (or a value unreadable): said on stderr, counted, reported; the probe
    /// keeps the version it applies.
    fn refused(&self, version: Option<u64>, why: String) {
        let kept = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.failed += 1;
            state.last_error = Some((version.unwrap_or(0), why.clone()));
            state.version
        };
        let which = version.map_or("a value".to_string(), |v| format!("version {v}"));
        eprintln!("sonde: control topic {}: {which} refused: {why}; still at version {kept}", self.topic);
        self.report(Some((version, why)));
    }

    /// The first packet's time, once known, is when the starting version began to count.
    fn first_packet(&self, first_ns: Option<u64>, definitions_version: u64) {
        let Some(first_ns) = first_ns else { return };
        let report = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.since_ns.is_some() || state.version == 0 {
                return;
            }
            state.since_ns = Some(first_ns);
            state.definitions_version = definitions_version;
            true
        };
        if report {
            self.report(None);
        }
    }

    /// Sends the probe's status report (the start's, and after each version applied or refused).
    /// A refused version newer than the one applied stays in every report until a newer one
    /// applies (the topic keeps only the newest report).
    pub fn report(&self, error: Option<(Option<u64>, String)>) {
        let state = self.state();
        let standing = state.last_error.clone().filter(|(v, _)| *v > state.version).map(|(v, e)| (Some(v), e));
        let (failed_version, error) = match error.or(standing) {
            Some((v, e)) => (v, Some(e)),
            None => (None, None),
        };
        let report = StatusReport {
            probe: self.probe.clone(),
            control_version: state.version,
            since: state.since_ns.map(|ns| ns as f64 / 1e9),
            definitions_version: state.definitions_version,
            at: sonde_kafka::control::wall_s(),
            error,
            failed_version,
        };
        if let Err(e) = self.status.send(&report) {
            eprintln!("sonde: {e}");
        }
    }

    /// Waits up to `timeout` for the reports to be delivered (the run's end).
    pub fn flush(&self, timeout: std::time::Duration) {
        if let Err(e) = self.status.flush(timeout) {
            eprintln!("sonde: {e}");
        }
    }

    /// `/api/status`'s `control` object.
    pub fn json(&self) -> serde_json::Value {
        let s = self.state();
        serde_json::json!({
            "probe": self.probe,
            "topic": self.topic,
            "status_topic": self.status_topic,
            "version": s.version,
            "since": s.since_ns.map(|ns| ns as f64 / 1e9),
            "definitions_version": s.definitions_version,
            "changes_applied": s.applied,
            "changes_failed": s.failed,
            "last_error": s.last_error.as_ref().map(|(_, e)| e),
        })
    }

    /// summary.json's `control` section.
    pub fn summary(&self) -> sonde_output::summary::ControlSummary {
        let s = self.state();
        sonde_output::summary::ControlSummary {
            topic: self.topic.clone(),
            status_topic: self.status_topic.clone(),
            probe: self.probe.clone(),
            version: s.version,
            since: s.since_ns.map(|ns| ns as f64 / 1e9),
            changes_applied: s.applied,
            changes_failed: s.failed,
            last_error: s.last_error.map(|(_, e)| e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = "web = tcp.dport == 80\n\
        syn = tcp.flags & 0x12 == 0x02 key ip4.src, ip4.dst, tcp.sport, tcp.dport measure none\n\
        fin = tcp.flags & 0x01 == 0x01 key ip4.src, ip4.dst, tcp.sport, tcp.dport measure none\n\
        connection = assoc syn -> fin within 1h\n";

    fn counter(text: &str) -> Counter {
        Counter::new(sonde_define::parse_definitions(text, sonde_define::MAX_NAME_BYTES).unwrap(), None, 10)
    }

    fn changes(counter: &Counter, text: &str) -> Result<Vec<Change>, String> {
        let wanted = sonde_define::parse_definitions(text, sonde_define::MAX_NAME_BYTES)
            .unwrap()
            .into_iter()
            .map(|d| (d.name, d.text))
            .collect::<Vec<_>>();
        in_an_order_the_set_takes(counter, counter.changes_to(&wanted))
    }

    #[test]
    fn a_version_the_set_refuses_is_refused_whole() {
        let c = counter(SET);
        // udp7000 could be added, but syn cannot be replaced while the association uses it.
        let text = format!("udp7000 = udp.dport == 7000\n{}", SET.replace("0x12 == 0x02", "0x02 == 0x02"));
        let e = changes(&c, &text).unwrap_err();
        assert!(e.contains("`syn` is used by the association `connection`"), "{e}");
        assert_eq!((c.version(), c.totals().len()), (1, 4), "the set itself untouched");
    }

    #[test]
    fn an_association_removed_with_its_member_replaced_goes_first() {
        let c = counter(SET);
        let text = "web = tcp.dport == 80\nsyn = tcp.flags & 0x02 == 0x02 key ip4.src measure none\n";
        let order = changes(&c, text).unwrap();
        assert_eq!(order.len(), 3, "{order:?}");
        assert!(matches!(&order[0], Change::Remove(n) if n == "connection"), "{order:?}");
        let mut c = c;
        for change in &order {
            c.apply(c.version(), change).unwrap();
        }
        let active: Vec<String> = c.totals().into_iter().filter(|t| !t.retired).map(|t| t.name).collect();
        assert_eq!(active, ["web", "syn"]);
    }

    #[test]
    fn the_same_set_needs_no_change() {
        let c = counter(SET);
        assert_eq!(changes(&c, SET), Ok(Vec::new()));
    }
}
