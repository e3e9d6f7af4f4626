//! `sonde monitor`'s controls: operators' definition changes (from the HTTP API) travel to the
//! reader, which applies them at the packet they reach; SIGHUP turns the definitions file into
//! such changes and reloads the internal networks.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Receiver;
use sonde_define::Counter;
use sonde_engine::{Controls, Edit};

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
}

impl Hooks {
    pub fn new(edits: Receiver<Edit>, reload: Option<Arc<Reloader>>, quiet: bool) -> Hooks {
        Hooks { edits, queued: VecDeque::new(), reload, reloads_seen: 0, new_nets: None, quiet }
    }
}

impl Controls for Hooks {
    /// After a SIGHUP (seen by any reader): the internal networks for the next drain, and the
    /// definitions file, read again, as changes against the set running now (the reader that
    /// counts them). A file that does not parse changes nothing (and says why).
    fn at_drain(&mut self, counter: Option<&Counter>) {
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
        let wanted = match sonde_define::parse_definitions(&text) {
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
