//! Formatting records as TSV or JSON Lines, and the output directory they go to.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sonde_anon::Anonymizer;
use sonde_flow::key::ip_order_key;
use sonde_flow::{FlowRecord, FlowSink, IcmpKind, IcmpRecord, RttSample};
use sonde_types::table::Table;

use crate::capture::{capture_tsv, CaptureCounters};
use crate::columns::{icmp_columns, tcp_columns, tcp_columns_with, udp_columns, udp_columns_with, Column};
use crate::files::{OutputFile, Outputs};
use crate::line::LineFormat;
use crate::pending::PendingFile;
use crate::sorted::{for_each_sorted, Lines, SortBuffer, Spilled};
use crate::summary::Summary;
use crate::tstat::{log_header, tcp_log, Layout, TstatFormats, TstatLog};
use sonde_flow::features::FeaturesConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    Tsv,
    Jsonl,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Tsv => "tsv",
            Format::Jsonl => "jsonl",
        }
    }
}

/// An output directory problem, with the path it concerns.
#[derive(Debug)]
pub struct OutputError {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for OutputError {}

fn error(path: &Path, reason: impl std::fmt::Display) -> OutputError {
    OutputError { path: path.to_path_buf(), reason: reason.to_string() }
}

/// A checked, writable output directory, held by this run alone: an exclusive lock on its
/// [`LOCK_NAME`] file lasts as long as any clone of the `OutputDir`, so a second run into the
/// same directory is refused at its start instead of mixing its files with this run's.
#[derive(Debug, Clone)]
pub struct OutputDir {
    dir: PathBuf,
    format: Format,
    layout: Layout,
    /// NFStream's flow features: their columns follow the logs' own.
    features: Option<FeaturesConfig>,
    /// What the run writes (`--outputs`); the write calls pass over the rest.
    outputs: Outputs,
    _lock: Arc<File>,
}

/// The file in an output directory that a run locks (`flock`, exclusive) for its whole length.
/// It stays after the run (removing it would let two runs lock two different files).
pub const LOCK_NAME: &str = ".sonde.lock";

/// Opens `path` for writing, creating it if absent, without following a symbolic link there
/// (`O_NOFOLLOW`: a link is an error, its target untouched) and without truncating it.
fn open_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)
}

/// Takes the exclusive lock on `dir`'s [`LOCK_NAME`], at once or not at all.
fn lock_dir(dir: &Path) -> Result<File, OutputError> {
    let path = dir.join(LOCK_NAME);
    let file = open_no_follow(&path).map_err(|e| match e.raw_os_error() {
        // The lock is never followed: a link there (planted, or made by hand) blocks every run.
        Some(libc::ELOOP) => error(
            &path,
            format!("the output directory's lock is a symbolic link, which sonde does not follow; remove it (rm {}) if no run uses the directory", path.display()),
        ),
        _ => error(&path, format!("cannot open the output directory's lock: {e}")),
    })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(error(
            dir,
            format!("in use by another sonde run (it holds {LOCK_NAME}); give each run its own output directory"),
        )),
        Err(fs::TryLockError::Error(e)) => Err(error(&path, format!("cannot lock the output directory: {e}"))),
    }
}

impl OutputDir {
    /// The files every run writes, by name: the flow logs in `format`, then the summary.
    pub fn file_names(format: Format) -> [String; 4] {
        Self::files(format).map(|f| f.name().to_string())
    }

    /// The files every run writes: the flow logs in `format` (TCP, UDP, ICMP), then the summary.
    pub fn files(format: Format) -> [OutputFile; 4] {
        [OutputFile::TcpFlows(format), OutputFile::UdpFlows(format), OutputFile::IcmpFlows(format), OutputFile::Summary]
    }

    /// Creates `dir` if needed and checks, before any work, that it is writable and holds no
    /// earlier run's outputs — none of [`OutputFile::ALL`] (with `force`, removes them).
    pub fn prepare(dir: &Path, format: Format, force: bool) -> Result<OutputDir, OutputError> {
        Self::prepare_with(dir, format, force, &[])
    }

    /// [`OutputDir::prepare`], also refusing to overwrite the files named in `others`. Every
    /// file sonde writes is in [`OutputFile::ALL`]: this remains for callers that still pass
    /// the list, until they call [`OutputDir::prepare`].
    ///
    /// The directory is locked first ([`LOCK_NAME`]): a directory another run holds is refused.
    /// Under the lock, `NAME.part` files of the outputs (left by a run that was killed while
    /// writing them, never complete) are removed. Names are looked at, never followed: a
    /// symbolic link named like an output counts as an earlier output.
    pub fn prepare_with(dir: &Path, format: Format, force: bool, others: &[&str]) -> Result<OutputDir, OutputError> {
        fs::create_dir_all(dir).map_err(|e| error(dir, format!("cannot create output directory: {e}")))?;
        if !dir.is_dir() {
            return Err(error(dir, "not a directory"));
        }
        let lock = lock_dir(dir)?;
        let ours = OutputFile::ALL.iter().map(|f| f.name());
        let names: Vec<&str> =
            ours.chain(others.iter().copied().filter(|n| OutputFile::from_name(n).is_none())).collect();
        for name in &names {
            let part = dir.join(crate::pending::part_name(std::ffi::OsStr::new(name)));
            if part.symlink_metadata().is_ok() {
                fs::remove_file(&part)
                    .map_err(|e| error(&part, format!("cannot remove an incomplete file a killed run left: {e}")))?;
            }
        }
        for name in names {
            let path = dir.join(name);
            if path.symlink_metadata().is_err() {
                continue;
            }
            if !force {
                return Err(error(&path, "exists from an earlier run (use --force to overwrite)"));
            }
            // An earlier run's output this run may not write (another format, an output turned
            // off) must not be left to look like this run's.
            fs::remove_file(&path).map_err(|e| error(&path, format!("cannot remove an earlier run's output: {e}")))?;
        }
        // A new file, never an existing name (a link there is removed, not written through).
        let probe = dir.join(".sonde-write-test");
        if probe.symlink_metadata().is_ok() {
            fs::remove_file(&probe).map_err(|e| error(&probe, format!("cannot remove: {e}")))?;
        }
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .and_then(|mut f| f.write_all(b"ok"))
            .map_err(|e| error(dir, format!("output directory is not writable: {e}")))?;
        let _ = fs::remove_file(&probe);
        Ok(OutputDir {
            dir: dir.to_path_buf(),
            format,
            layout: Layout::Sonde,
            features: None,
            outputs: Outputs::all(),
            _lock: Arc::new(lock),
        })
    }

    /// The flow logs in `layout` (`Layout::Tstat`: Tstat's three logs instead of
    /// tcp_flows/udp_flows; the lines must come from sinks of the same layout,
    /// [`LineSink::layout`]).
    pub fn with_layout(self, layout: Layout) -> OutputDir {
        OutputDir { layout, ..self }
    }

    /// The flow logs' layout.
    /// The sonde layout's flow logs with the columns of NFStream's flow features after their
    /// own (`--features ml`; their lines from a [`LineSink::features`] of the same).
    pub fn with_features(self, features: Option<FeaturesConfig>) -> OutputDir {
        OutputDir { features, ..self }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Writes only `outputs`: [`OutputDir::write_flow_logs`], [`OutputDir::write_each`],
    /// [`OutputDir::write_intervals`] and [`OutputDir::write_definitions`] pass over the other
    /// files (summary.json is always written).
    pub fn with_outputs(self, outputs: Outputs) -> OutputDir {
        OutputDir { outputs, ..self }
    }

    /// What the run writes.
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// The flow logs [`OutputDir::write_flow_lines`] writes, by name, in the order written.
    pub fn flow_log_names(&self) -> Vec<String> {
        let icmp = OutputFile::IcmpFlows(self.format).name().to_string();
        match self.layout {
            Layout::Sonde => Self::file_names(self.format)[..2].iter().cloned().chain([icmp]).collect(),
            Layout::Tstat => OutputFile::TSTAT.iter().map(|f| f.name().to_string()).chain([icmp]).collect(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The flow logs' format.
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes both flow logs from the lines of several sinks (one per worker), in output order.
    /// With more than one worker the two files are sorted and written at the same time (the
    /// end of a run is otherwise serial); with one, one after the other.
    pub fn write_lines(&self, sinks: Vec<LineSink>) -> Result<(), OutputError> {
        self.write_flow_lines(&sinks.into_iter().map(FlowLines::from).collect::<Vec<_>>())
    }

    /// [`OutputDir::write_lines`] for lines already taken out of their sinks: every flow log
    /// is attempted; the first failure is returned ([`OutputDir::write_flow_logs`] says which
    /// were written).
    pub fn write_flow_lines(&self, parts: &[FlowLines]) -> Result<(), OutputError> {
        self.write_flow_logs(parts).into_iter().try_for_each(|(_, result)| result)
    }

    /// Writes every flow log ([`OutputDir::flow_log_names`]), each attempted whatever became
    /// of the others (a full disk may still take a smaller one); returns each with its result,
    /// in the order written. With more than one worker the TCP and UDP logs are sorted and
    /// written at the same time (the end of a run is otherwise serial).
    pub fn write_flow_logs(&self, parts: &[FlowLines]) -> Vec<(OutputFile, Result<(), OutputError>)> {
        let icmp: Vec<&Lines> = parts.iter().map(|s| &s.icmp).collect();
        let [tcp_file, udp_file, icmp_file, _] = Self::files(self.format);
        // Few lines: written after the others.
        let write_icmp =
            || write_file(&self.path(icmp_file.name()), |w| write_sorted(w, self.format, &icmp_columns(), &icmp));
        let mut results = Vec::with_capacity(4);
        let wants = |f: OutputFile| self.outputs.wants(f);
        if self.layout == Layout::Tstat {
            // Tstat has no ICMP log: sonde's goes beside its three.
            results.extend(self.write_tstat_lines(parts));
            if wants(icmp_file) {
                results.push((icmp_file, write_icmp()));
            }
            return results;
        }
        let (tcp, udp): (Vec<&Lines>, Vec<&Lines>) = parts.iter().map(|s| (&s.tcp, &s.udp)).unzip();
        let write_tcp = || {
            write_file(&self.path(tcp_file.name()), |w| {
                write_sorted(w, self.format, &tcp_columns_with(self.features), &tcp)
            })
        };
        let write_udp = || {
            write_file(&self.path(udp_file.name()), |w| {
                write_sorted(w, self.format, &udp_columns_with(self.features), &udp)
            })
        };
        let (tcp, udp) = match (wants(tcp_file), wants(udp_file)) {
            (true, true) if parts.len() > 1 => std::thread::scope(|scope| {
                let udp = scope.spawn(write_udp);
                let tcp = write_tcp();
                (Some(tcp), Some(udp.join().unwrap_or_else(|p| std::panic::resume_unwind(p))))
            }),
            (tcp, udp) => (tcp.then(write_tcp), udp.then(write_udp)),
        };
        let icmp = wants(icmp_file).then(write_icmp);
        let written = [(tcp_file, tcp), (udp_file, udp), (icmp_file, icmp)];
        results.extend(written.into_iter().filter_map(|(file, result)| Some((file, result?))));
        results
    }

    /// Tstat's three logs, each its header line then its lines in output order.
    fn write_tstat_lines(&self, parts: &[FlowLines]) -> Vec<(OutputFile, Result<(), OutputError>)> {
        let logs = [
            (OutputFile::TstatTcpComplete, TstatLog::TcpComplete),
            (OutputFile::TstatTcpNocomplete, TstatLog::TcpNocomplete),
            (OutputFile::TstatUdpComplete, TstatLog::UdpComplete),
        ];
        logs.into_iter()
            .filter(|&(file, _)| self.outputs.wants(file))
            .map(|(file, log)| {
                let lines: Vec<&Lines> = parts.iter().map(|p| p.slot(Slot::of(log))).collect();
                let header = log_header(log);
                let result = write_file(&self.path(file.name()), |w| {
                    w.write_all(header.as_bytes())?;
                    for_each_sorted(&lines, |line| w.write_all(line))
                });
                (file, result)
            })
            .collect()
    }

    /// Writes each of `files` (as [`OutputDir::write`]), each attempted whatever became of
    /// the others; returns each with its result.
    pub fn write_each(&self, files: Vec<(OutputFile, String)>) -> Vec<(OutputFile, Result<(), OutputError>)> {
        files
            .into_iter()
            .filter(|&(file, _)| self.outputs.wants(file))
            .map(|(file, text)| (file, self.write(file, text.as_bytes())))
            .collect()
    }

    /// Writes summary.json from its text (as [`Summary::to_json`] gives it).
    pub fn write_summary(&self, json: &str) -> Result<(), OutputError> {
        self.write(OutputFile::Summary, json.as_bytes())
    }

    /// Writes `summary` as summary.json.
    pub fn write_run_summary(&self, summary: &Summary) -> Result<OutputFile, OutputError> {
        self.write(OutputFile::Summary, summary.to_json().as_bytes()).map(|()| OutputFile::Summary)
    }

    /// Writes the interval files of `report` (the tables' only when the run kept them);
    /// returns them in the order written.
    pub fn write_intervals(&self, report: &sonde_stats::Report) -> Result<Vec<OutputFile>, OutputError> {
        let mut written = Vec::new();
        for (file, table) in interval_tables(report)? {
            if !self.outputs.wants(file) {
                continue;
            }
            self.write(file, table.tsv().as_bytes())?;
            written.push(file);
        }
        Ok(written)
    }

    /// Writes definitions.tsv and the gap, flow and association files the definitions of
    /// `counter` ask for; returns them in the order written.
    pub fn write_definitions(&self, counter: &sonde_define::Counter) -> Result<Vec<OutputFile>, OutputError> {
        let mut written = Vec::new();
        for (file, table) in definition_tables(counter) {
            if self.outputs.wants(file) {
                self.write(file, table.tsv().as_bytes())?;
                written.push(file);
            }
        }
        Ok(written)
    }

    /// Writes capture.tsv: the capture's counters per interval (by start, ns).
    pub fn write_capture(
        &self,
        intervals: &[(u64, CaptureCounters)],
        interval_ns: u64,
    ) -> Result<OutputFile, OutputError> {
        self.write(OutputFile::Capture, capture_tsv(intervals, interval_ns).as_bytes()).map(|()| OutputFile::Capture)
    }

    /// Writes `file` whole or not at all.
    pub fn write(&self, file: OutputFile, bytes: &[u8]) -> Result<(), OutputError> {
        write_file(&self.path(file.name()), |w| w.write_all(bytes))
    }
}

/// The definitions files `counter` asks for and their texts, in the order written:
/// definitions.tsv, then the gap files (a definition with `gap`), the flows (`length`) and the
/// associations (a file with associations).
pub fn definition_files(counter: &sonde_define::Counter) -> Vec<(OutputFile, String)> {
    definition_tables(counter).into_iter().map(|(file, table)| (file, table.tsv())).collect()
}

/// The definitions outputs `counter` asks for as typed tables, in the order written (as
/// [`definition_files`]): what every format renders.
pub fn definition_tables(counter: &sonde_define::Counter) -> Vec<(OutputFile, Table<'_>)> {
    let mut files = vec![(OutputFile::Definitions, counter.counts_table())];
    let (gap, length, associations) = counter.wants();
    if gap {
        files.push((OutputFile::DefinitionGaps, counter.gaps_table()));
        files.push((OutputFile::DefinitionGapHistogram, counter.gap_histogram_table()));
    }
    if length {
        files.push((OutputFile::DefinitionFlows, counter.flows_table()));
    }
    if associations {
        files.push((OutputFile::DefinitionAssociations, counter.associations_table()));
        files.push((OutputFile::DefinitionAssociationSamples, counter.association_samples_table()));
    }
    files
}

/// The interval outputs of `report` as typed tables by file, in the order written (the tables'
/// only when the run kept them).
pub fn interval_tables(report: &sonde_stats::Report) -> Result<Vec<(OutputFile, Table<'_>)>, OutputError> {
    report
        .outputs()
        .into_iter()
        .map(|(name, table)| {
            let file = OutputFile::from_name(name)
                .ok_or_else(|| error(Path::new(name), "not a file sonde-output knows (add it to OutputFile)"))?;
            Ok((file, table))
        })
        .collect()
}

/// The output order: flow start, then protocol and tuple, then end and packet counts as tie
/// breakers, as plain integers (fields in comparison order; addresses as family and two
/// halves, so the key is 72 bytes, not the 112 of a tuple with `u128`s). It does not depend on
/// the order records arrived in, which varies with the number of workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OrderKey {
    first_ns: u64,
    protocol: u8,
    client_family: u8,
    client_ip: (u64, u64),
    client_port: u16,
    server_family: u8,
    server_ip: (u64, u64),
    server_port: u16,
    last_ns: u64,
    pkts: (u64, u64),
}

impl OrderKey {
    /// Bytes in [`OrderKey::to_bytes`].
    pub const BYTES: usize = 71;

    /// The first field of the order.
    pub(crate) fn first_ns(&self) -> u64 {
        self.first_ns
    }

    /// The key as bytes, big-endian field by field: byte order is key order.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&self.first_ns.to_be_bytes());
        put(&[self.protocol, self.client_family]);
        put(&self.client_ip.0.to_be_bytes());
        put(&self.client_ip.1.to_be_bytes());
        put(&self.client_port.to_be_bytes());
        put(&[self.server_family]);
        put(&self.server_ip.0.to_be_bytes());
        put(&self.server_ip.1.to_be_bytes());
        put(&self.server_port.to_be_bytes());
        put(&self.last_ns.to_be_bytes());
        put(&self.pkts.0.to_be_bytes());
        put(&self.pkts.1.to_be_bytes());
        out
    }

    /// The key [`OrderKey::to_bytes`] gave `bytes`.
    pub fn from_bytes(bytes: &[u8; Self::BYTES]) -> OrderKey {
        let mut at = 0;
        let mut take = |n: usize| {
            at += n;
            &bytes[at - n..at]
        };
        let u64_at = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8 bytes"));
        let u16_at = |b: &[u8]| u16::from_be_bytes(b.try_into().expect("2 bytes"));
        let first_ns = u64_at(take(8));
        let (protocol, client_family) = (take(1)[0], take(1)[0]);
        let client_ip = (u64_at(take(8)), u64_at(take(8)));
        let client_port = u16_at(take(2));
        let server_family = take(1)[0];
        let server_ip = (u64_at(take(8)), u64_at(take(8)));
        let server_port = u16_at(take(2));
        let last_ns = u64_at(take(8));
        let pkts = (u64_at(take(8)), u64_at(take(8)));
        OrderKey {
            first_ns,
            protocol,
            client_family,
            client_ip,
            client_port,
            server_family,
            server_ip,
            server_port,
            last_ns,
            pkts,
        }
    }
}

/// The output order of an ICMP record: as a flow's, the protocol 1 or 58, the echo identifier
/// (or type and code) in the client's port and the kind in the server's (0 echo, 1 message).
pub fn icmp_order_key(r: &IcmpRecord) -> OrderKey {
    let k = &r.key;
    let protocol = if k.client.is_ipv6() { 58 } else { 1 };
    let (client_port, server_port) = match k.kind {
        IcmpKind::Echo { ident } => (ident, 0),
        IcmpKind::Message { icmp_type, code } => (u16::from(icmp_type) << 8 | u16::from(code), 1),
    };
    let ((client_family, client_ip), (server_family, server_ip)) = (ip_order_key(k.client), ip_order_key(k.server));
    OrderKey {
        first_ns: r.first_ns,
        protocol,
        client_family,
        client_ip,
        client_port,
        server_family,
        server_ip,
        server_port,
        last_ns: r.last_ns,
        pkts: (r.client.pkts, r.server.pkts),
    }
}

pub fn order_key(r: &FlowRecord) -> OrderKey {
    let e = r.endpoints();
    let (protocol, last_ns, pkts) = match r {
        FlowRecord::Tcp(t) => (6u8, t.last_ns, (t.client.pkts, t.server.pkts)),
        FlowRecord::Udp(u) => (17u8, u.last_ns, (u.client.pkts, u.server.pkts)),
    };
    let ((client_family, client_ip), (server_family, server_ip)) =
        (ip_order_key(e.client_ip), ip_order_key(e.server_ip));
    OrderKey {
        first_ns: r.first_ns(),
        protocol,
        client_family,
        client_ip,
        client_port: e.client_port,
        server_family,
        server_ip,
        server_port: e.server_port,
        last_ns,
        pkts,
    }
}

/// Flow log lines taken out of their sinks while a run goes on (a live monitor hands them to
/// its dashboard and its rotated outputs): given back whole, they write the same logs. With a
/// [`SortBuffer`], lines beyond its budget wait on disk in sorted runs.
#[derive(Default)]
pub struct FlowLines {
    tcp: Lines,
    udp: Lines,
    /// ICMP and ICMPv6 entries (icmp_flows): kept with the flows, written beside them.
    icmp: Lines,
    /// `--layout tstat`: log_tcp_nocomplete's lines (`tcp` holds log_tcp_complete's, `udp`
    /// log_udp_complete's).
    tcp_nocomplete: Lines,
    sort: Option<Arc<SortBuffer>>,
    spilled: Spilled,
}

/// Which of a [`FlowLines`]' logs a line goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Tcp,
    Udp,
    TcpNocomplete,
}

impl Slot {
    fn of(log: TstatLog) -> Slot {
        match log {
            TstatLog::TcpComplete => Slot::Tcp,
            TstatLog::TcpNocomplete => Slot::TcpNocomplete,
            TstatLog::UdpComplete => Slot::Udp,
        }
    }
}

impl From<LineSink> for FlowLines {
    fn from(sink: LineSink) -> FlowLines {
        sink.lines
    }
}

impl FlowLines {
    /// No lines yet; beyond `sort`'s budget they go to disk.
    pub fn new(sort: Option<Arc<SortBuffer>>) -> FlowLines {
        FlowLines { sort, ..FlowLines::default() }
    }

    /// Appends `other`'s lines (and takes its sort buffer if this has none and never failed
    /// to write a run).
    pub fn absorb(&mut self, other: FlowLines) {
        self.tcp.absorb(other.tcp);
        self.udp.absorb(other.udp);
        self.icmp.absorb(other.icmp);
        self.tcp_nocomplete.absorb(other.tcp_nocomplete);
        self.spilled.add(&other.spilled);
        if self.sort.is_none() && self.spilled.failure.is_none() {
            self.sort = other.sort;
        }
        self.bound(true);
    }

    fn push(&mut self, slot: Slot, key: OrderKey, line: &[u8]) {
        match slot {
            Slot::Tcp => self.tcp.push(key, line),
            Slot::Udp => self.udp.push(key, line),
            Slot::TcpNocomplete => self.tcp_nocomplete.push(key, line),
        }
        self.bound(false);
    }

    fn slot(&self, slot: Slot) -> &Lines {
        match slot {
            Slot::Tcp => &self.tcp,
            Slot::Udp => &self.udp,
            Slot::TcpNocomplete => &self.tcp_nocomplete,
        }
    }

    /// Sends the lines in memory to disk when they exceed the budget (and, after `absorb`,
    /// merges runs so that no level holds too many). A run that cannot be written leaves its
    /// lines in memory, says why in [`FlowLines::spilled`], and ends the spilling.
    #[inline]
    fn bound(&mut self, absorbed: bool) {
        let Some(sort) = &self.sort else { return };
        let over =
            self.tcp.held_bytes() + self.udp.held_bytes() + self.icmp.held_bytes() + self.tcp_nocomplete.held_bytes()
                > sort.bytes;
        if !(over || absorbed) {
            return;
        }
        let sort = sort.clone();
        let spilled = &mut self.spilled;
        let logs = [&mut self.tcp, &mut self.udp, &mut self.icmp, &mut self.tcp_nocomplete];
        let done = logs.into_iter().try_for_each(|lines| {
            if over {
                lines.spill(&sort, spilled)
            } else {
                lines.compact(&sort, spilled)
            }
        });
        if let Err(e) = done {
            spilled.failure = Some(format!("writing a sorted run in {}: {e}", sort.dir.display()));
            self.sort = None;
        }
    }

    pub fn len(&self) -> usize {
        self.tcp.len() + self.udp.len() + self.icmp.len() + self.tcp_nocomplete.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of text the lines hold, in memory and on disk.
    pub fn text_bytes(&self) -> usize {
        self.tcp.text_bytes() + self.udp.text_bytes() + self.icmp.text_bytes() + self.tcp_nocomplete.text_bytes()
    }

    /// What went to disk.
    pub fn spilled(&self) -> &Spilled {
        &self.spilled
    }

    /// The TCP (`udp` false) or UDP log's lines in memory, in the order the flows ended (what
    /// a drain took from a sink without a sort buffer: all of them).
    pub fn lines(&self, udp: bool) -> impl Iterator<Item = &[u8]> {
        if udp { &self.udp } else { &self.tcp }.in_memory()
    }

    /// The TCP and UDP logs of `parts` as the files [`OutputDir::write_flow_lines`] writes:
    /// names and contents, in output order (the ICMP log: [`FlowLines::render_icmp`]).
    pub fn render(format: Format, parts: &[&FlowLines]) -> io::Result<[(String, Vec<u8>); 2]> {
        let (tcp, udp): (Vec<&Lines>, Vec<&Lines>) = parts.iter().map(|s| (&s.tcp, &s.udp)).unzip();
        let [tcp_name, udp_name, _, _] = OutputDir::file_names(format);
        let (mut tcp_text, mut udp_text) = (Vec::new(), Vec::new());
        write_sorted(&mut tcp_text, format, &tcp_columns(), &tcp)?;
        write_sorted(&mut udp_text, format, &udp_columns(), &udp)?;
        Ok([(tcp_name, tcp_text), (udp_name, udp_text)])
    }

    /// The ICMP log of `parts` as [`OutputDir::write_flow_lines`] writes it: name and contents.
    pub fn render_icmp(format: Format, parts: &[&FlowLines]) -> io::Result<(String, Vec<u8>)> {
        let icmp: Vec<&Lines> = parts.iter().map(|s| &s.icmp).collect();
        let mut text = Vec::new();
        write_sorted(&mut text, format, &icmp_columns(), &icmp)?;
        Ok((OutputFile::IcmpFlows(format).name().to_string(), text))
    }

    /// The header a log of `format` starts with (empty for JSON Lines).
    pub fn header(format: Format, udp: bool) -> String {
        let mut out = Vec::new();
        let written = if udp {
            write_header(&mut out, format, &udp_columns())
        } else {
            write_header(&mut out, format, &tcp_columns())
        };
        written.map_or_else(|_| String::new(), |()| String::from_utf8_lossy(&out).into_owned())
    }
}

impl sonde_engine::Part for FlowLines {
    fn absorb(&mut self, other: FlowLines) {
        FlowLines::absorb(self, other);
    }
    fn is_empty(&self) -> bool {
        FlowLines::is_empty(self)
    }
}

/// Each worker formats its flows' lines as they end; drains and the run's end take them.
impl sonde_engine::WorkerSink for LineSink {
    type Part = FlowLines;
    fn take(&mut self) -> FlowLines {
        LineSink::take(self)
    }
}

/// A flow sink that formats each record into its line as the flow ends — in the worker thread
/// that ended it, so formatting runs in parallel and the wide record is dropped at once.
pub struct LineSink {
    tcp_format: LineFormat<sonde_flow::TcpRecord>,
    udp_format: LineFormat<sonde_flow::UdpRecord>,
    icmp_format: LineFormat<IcmpRecord>,
    lines: FlowLines,
    scratch: Vec<u8>,
    /// Replaces the addresses before a line is formatted and ordered (one per worker: its
    /// prefix cache is the worker's own).
    anon: Option<Anonymizer>,
    format: Format,
    /// `--layout tstat`: each record goes to one of Tstat's logs in its layout instead.
    tstat: Option<Box<TstatFormats>>,
    /// Which records are formatted (TCP, UDP, ICMP): those of the logs the run writes.
    formats: [bool; 3],
}

impl LineSink {
    pub fn new(format: Format) -> LineSink {
        LineSink {
            tcp_format: LineFormat::of(format, false),
            udp_format: LineFormat::of(format, false),
            icmp_format: LineFormat::of(format, false),
            lines: FlowLines::default(),
            scratch: Vec::new(),
            anon: None,
            format,
            tstat: None,
            formats: [true; 3],
        }
    }

    /// Formats only the records of the flow logs `outputs` writes (in the sink's layout: call
    /// after [`LineSink::layout`]); the others are dropped as they come, unformatted.
    pub fn only(self, outputs: &Outputs) -> LineSink {
        let [tcp, udp] = match self.tstat {
            None => [OutputFile::TcpFlows(self.format), OutputFile::UdpFlows(self.format)].map(|f| outputs.wants(f)),
            Some(_) => [
                outputs.wants(OutputFile::TstatTcpComplete) || outputs.wants(OutputFile::TstatTcpNocomplete),
                outputs.wants(OutputFile::TstatUdpComplete),
            ],
        };
        LineSink { formats: [tcp, udp, outputs.wants(OutputFile::IcmpFlows(self.format))], ..self }
    }

    /// Formats the records in `layout` (`Layout::Tstat`: Tstat's three logs, for an
    /// [`OutputDir`] of the same layout).
    pub fn layout(self, layout: Layout) -> LineSink {
        let tstat = match layout {
            Layout::Sonde => None,
            Layout::Tstat => Some(Box::new(TstatFormats::new(self.anon.is_some()))),
        };
        LineSink { tstat, ..self }
    }

    /// Writes every address through `anon`: the logs hold no original address, and are in the
    /// order of the addresses they show, with `*_iscrypto` set.
    pub fn anonymized(self, anon: Option<Anonymizer>) -> LineSink {
        if anon.is_none() {
            return self;
        }
        LineSink {
            tcp_format: LineFormat::of(self.format, true),
            udp_format: LineFormat::of(self.format, true),
            icmp_format: LineFormat::of(self.format, true),
            tstat: self.tstat.as_ref().map(|_| Box::new(TstatFormats::new(true))),
            anon,
            ..self
        }
    }

    /// Writes the columns of NFStream's flow features after the logs' own (sonde's layout; call
    /// after [`LineSink::anonymized`]): the logs' own by the generated code, the features' read
    /// through their column functions.
    pub fn features(self, features: Option<FeaturesConfig>) -> LineSink {
        if features.is_none() {
            return self;
        }
        let Some(cfg) = features else { return self };
        let anonymized = self.anon.is_some();
        LineSink {
            tcp_format: LineFormat::of_with(self.format, anonymized, crate::columns::feature_columns(cfg)),
            udp_format: LineFormat::of_with(self.format, anonymized, crate::columns::feature_columns(cfg)),
            ..self
        }
    }

    /// Holds at most `sort`'s budget of lines in memory, the rest in sorted runs on disk
    /// (without, every line until taken).
    pub fn sorted_in(self, sort: Option<Arc<SortBuffer>>) -> LineSink {
        LineSink { lines: FlowLines::new(sort), ..self }
    }

    /// The lines formatted since the last call (the sink keeps formatting).
    pub fn take(&mut self) -> FlowLines {
        let fresh = FlowLines::new(self.lines.sort.clone());
        std::mem::replace(&mut self.lines, fresh)
    }

    /// Flows formatted so far.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl FlowSink for LineSink {
    fn flow(&mut self, record: &FlowRecord) {
        if !self.formats[matches!(record, FlowRecord::Udp(_)) as usize] {
            return;
        }
        if self.anon.is_some() {
            return self.push_anonymized(record);
        }
        self.push(record)
    }
    /// The flow logs hold each record's RTT summary, not its samples.
    fn rtt_sample(&mut self, _: &RttSample) {}
    /// The logs hold flows that ended.
    fn interim(&mut self, _: &FlowRecord) {}
    fn icmp(&mut self, record: &IcmpRecord) {
        if !self.formats[2] {
            return;
        }
        let record = shown_icmp(record, self.anon.as_mut());
        let key = icmp_order_key(&record);
        let line = self.icmp_format.format(&mut self.scratch, &record);
        self.lines.icmp.push(key, line);
        self.lines.bound(false);
    }
}

impl LineSink {
    /// Out of line: the copy of the wide record stays off the plain path.
    #[inline(never)]
    fn push_anonymized(&mut self, record: &FlowRecord) {
        if let Some(anon) = self.anon.as_mut() {
            let shown = anonymized_record(record, anon);
            self.push(&shown);
        }
    }

    #[inline]
    fn push(&mut self, record: &FlowRecord) {
        if let Some(tstat) = &self.tstat {
            return push_tstat(&mut self.lines, &mut self.scratch, tstat, record);
        }
        let key = order_key(record);
        // Formatted in a reused buffer, then appended to the log's text.
        match record {
            FlowRecord::Tcp(t) => self.lines.push(Slot::Tcp, key, self.tcp_format.format(&mut self.scratch, t)),
            FlowRecord::Udp(u) => self.lines.push(Slot::Udp, key, self.udp_format.format(&mut self.scratch, u)),
        }
    }
}

/// A record's line in Tstat's layout, in the log Tstat would write it to (none for a TCP flow
/// Tstat does not track: [`tcp_log`]).
fn push_tstat(lines: &mut FlowLines, scratch: &mut Vec<u8>, tstat: &TstatFormats, record: &FlowRecord) {
    let key = order_key(record);
    match record {
        FlowRecord::Tcp(t) => match tcp_log(t) {
            Some(TstatLog::TcpComplete) => lines.push(Slot::Tcp, key, tstat.complete.format(scratch, t)),
            Some(_) => lines.push(Slot::TcpNocomplete, key, tstat.nocomplete.format(scratch, t)),
            None => {}
        },
        FlowRecord::Udp(u) => lines.push(Slot::Udp, key, tstat.udp.format(scratch, u)),
    }
}

/// An ICMP record as a log shows it: as it is, or with both addresses through `anon`.
pub fn shown_icmp<'a>(record: &'a IcmpRecord, anon: Option<&mut Anonymizer>) -> std::borrow::Cow<'a, IcmpRecord> {
    match anon {
        None => std::borrow::Cow::Borrowed(record),
        Some(anon) => {
            let mut shown = record.clone();
            (shown.key.client, shown.key.server) = (anon.ip(shown.key.client), anon.ip(shown.key.server));
            std::borrow::Cow::Owned(shown)
        }
    }
}

/// `record` as an anonymised log shows it: both addresses through `anon`, and the addresses
/// its application facts hold (a DNS resolver, DNS answers, names that are address literals).
pub fn anonymized_record(record: &FlowRecord, anon: &mut Anonymizer) -> FlowRecord {
    let mut shown = record.clone();
    let e = shown.endpoints_mut();
    (e.client_ip, e.server_ip) = (anon.ip(e.client_ip), anon.ip(e.server_ip));
    let app = match &mut shown {
        FlowRecord::Tcp(t) => t.app.as_deref_mut(),
        FlowRecord::Udp(u) => u.app.as_deref_mut(),
    };
    if let Some(app) = app {
        // Shared with the cache and other flows: the shown record gets its own copy.
        if let Some(r) = app.resolved.as_mut().map(std::sync::Arc::make_mut) {
            r.resolver = anon.ip(r.resolver);
            if let Some(name) = anon.host(&r.name) {
                r.name = name.into();
            }
        }
        if let Some(d) = app.dns.as_deref_mut() {
            for a in &mut d.answers {
                *a = anon.ip(*a);
            }
            host_text(&mut d.query, anon);
        }
        // Names that are address literals (a Host of `10.0.0.1:8080`, a PTR query).
        let tls = app.tls.as_deref_mut().into_iter().chain(app.quic.as_deref_mut().map(|q| &mut q.tls));
        for t in tls {
            host_text(&mut t.sni, anon);
            host_text(&mut t.cert_subject, anon);
        }
        if let Some(h) = app.http.as_deref_mut() {
            host_text(&mut h.host, anon);
            host_text(&mut h.target, anon);
        }
        if let Some(t) = app.tstat.as_deref_mut() {
            host_text(&mut t.http_host, anon);
            host_text(&mut t.sni, anon);
            host_text(&mut t.scn, anon);
        }
    }
    shown
}

fn host_text<S: std::ops::Deref<Target = str> + From<String>>(text: &mut Option<S>, anon: &mut Anonymizer) {
    if let Some(mapped) = text.as_deref().and_then(|t| anon.host(t)) {
        *text = Some(mapped.into());
    }
}

/// Writes the lines of every sink in output order.
fn write_sorted<R>(w: &mut impl Write, format: Format, columns: &[Column<R>], sinks: &[&Lines]) -> io::Result<()> {
    write_header(w, format, columns)?;
    for_each_sorted(sinks, |line| w.write_all(line))
}

/// Writes `path` whole or not at all, through a buffer, with [`PendingFile`].
fn write_file(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<PendingFile>) -> io::Result<()>,
) -> Result<(), OutputError> {
    let pending = PendingFile::create(path, true).map_err(|e| error(path, format!("cannot create: {e}")))?;
    let mut w = BufWriter::with_capacity(1 << 16, pending);
    body(&mut w).and_then(|_| w.flush()).map_err(|e| error(path, format!("write failed: {e}")))?;
    let pending = w.into_inner().map_err(|e| error(path, format!("write failed: {}", e.error())))?;
    pending.commit(true).map_err(|e| error(path, format!("write failed: {e}")))
}

/// Writes `records` with `columns` in `format`: for TSV a header line first.
pub fn write_records<'a, R: 'a>(
    w: &mut impl Write,
    format: Format,
    columns: &[Column<R>],
    records: impl Iterator<Item = &'a R>,
) -> io::Result<()> {
    write_header(w, format, columns)?;
    let line_format = LineFormat::new(format, columns);
    let mut scratch = Vec::new();
    for record in records {
        w.write_all(line_format.format(&mut scratch, record))?;
    }
    Ok(())
}

fn write_header<R>(w: &mut impl Write, format: Format, columns: &[Column<R>]) -> io::Result<()> {
    if format == Format::Tsv {
        let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
        writeln!(w, "{}", names.join("\t"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::Kind;
    use crate::columns::Value;
    use crate::pending::tests::names;

    struct Row(u64, &'static str);

    fn cols() -> Vec<Column<Row>> {
        vec![
            Column { name: "n", kind: Kind::Count, value: |r| Value::Int(r.0) },
            Column { name: "t", kind: Kind::Label, value: |r| Value::Text(r.1) },
            Column { name: "ms", kind: Kind::Duration, value: |r| Value::Ms(r.0 * 1_000_000 / 3) },
            Column { name: "x", kind: Kind::Label, value: |_| Value::Missing },
            Column { name: "none", kind: Kind::Duration, value: |_| Value::NoSample },
        ]
    }

    #[test]
    fn tsv_has_header_and_fixed_decimals() {
        let mut out = Vec::new();
        write_records(&mut out, Format::Tsv, &cols(), [Row(1, "a"), Row(2, "b")].iter()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "n\tt\tms\tx\tnone\n1\ta\t0.333\t-\t0.000\n2\tb\t0.667\t-\t0.000\n"
        );
    }

    #[test]
    fn jsonl_is_one_object_per_line() {
        let mut out = Vec::new();
        write_records(&mut out, Format::Jsonl, &cols(), [Row(3, "c")].iter()).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\"n\":3,\"t\":\"c\",\"ms\":1.000,\"x\":null,\"none\":null}\n");
    }

    #[test]
    fn refuses_to_overwrite_without_force() {
        let dir = std::env::temp_dir().join(format!("sonde-out-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let out = OutputDir::prepare(&dir, Format::Tsv, false).unwrap();
        out.write_summary("{}").unwrap();
        drop(out);
        let err = OutputDir::prepare(&dir, Format::Tsv, false).unwrap_err();
        assert!(err.to_string().contains("--force"), "{err}");
        assert!(OutputDir::prepare(&dir, Format::Tsv, true).is_ok());
        fs::remove_dir_all(&dir).unwrap();
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sonde-out-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// Every file of [`OutputFile::ALL`] is refused, and removed with force: the caller passes
    /// no list.
    #[test]
    fn prepare_refuses_every_output_file() {
        let dir = scratch("every");
        for file in OutputFile::ALL {
            OutputDir::prepare(&dir, Format::Tsv, false).unwrap();
            fs::write(dir.join(file.name()), b"earlier").unwrap();
            let err = OutputDir::prepare(&dir, Format::Jsonl, false).unwrap_err();
            assert!(err.path.ends_with(file.name()), "{file}: {err}");
            OutputDir::prepare(&dir, Format::Jsonl, true).unwrap();
            assert!(!dir.join(file.name()).exists(), "{file}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 20: a second run into a directory a run holds is refused at its start (the
    /// first run's files are written at its end, so both would otherwise succeed and mix).
    #[test]
    fn a_second_run_into_a_held_directory_is_refused() {
        let dir = scratch("lock");
        let first = OutputDir::prepare(&dir, Format::Tsv, false).unwrap();
        let held = first.clone();
        drop(first);
        let err = OutputDir::prepare(&dir, Format::Tsv, true).unwrap_err();
        assert!(err.to_string().contains("in use by another sonde run"), "{err}");
        held.write_summary("{}").unwrap();
        drop(held);
        // Released with the last clone; the lock file stays, and is not an output.
        let again = OutputDir::prepare(&dir, Format::Tsv, true).unwrap();
        assert_eq!(names(&dir), [LOCK_NAME]);
        drop(again);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 20: links in the output directory are never followed. The write probe named
    /// `.sonde-write-test` once truncated its target; an output name that is a dangling link
    /// once created its target; the lock file is not opened through a link.
    #[test]
    fn links_in_the_output_directory_are_not_followed() {
        let dir = scratch("links");
        fs::create_dir_all(&dir).unwrap();
        let victim = dir.with_extension("victim");
        fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(".sonde-write-test")).unwrap();
        let nowhere = dir.with_extension("nowhere");
        std::os::unix::fs::symlink(&nowhere, dir.join("tcp_flows.tsv")).unwrap();
        // The dangling link is an earlier output: refused, then with --force removed (the link).
        let err = OutputDir::prepare(&dir, Format::Tsv, false).unwrap_err();
        assert!(err.path.ends_with("tcp_flows.tsv"), "{err}");
        let out = OutputDir::prepare(&dir, Format::Tsv, true).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(names(&dir), [LOCK_NAME]);
        // A link made after the check is replaced by the output, not written through.
        std::os::unix::fs::symlink(&nowhere, dir.join("tcp_flows.tsv")).unwrap();
        out.write_flow_lines(&[FlowLines::default()]).unwrap();
        assert!(nowhere.symlink_metadata().is_err(), "a dangling link's target was created");
        assert!(fs::read_to_string(dir.join("tcp_flows.tsv")).unwrap().starts_with("c_ip\t"));
        drop(out);
        // The lock file as a link: an error, its target not created.
        fs::remove_file(dir.join(LOCK_NAME)).unwrap();
        std::os::unix::fs::symlink(&nowhere, dir.join(LOCK_NAME)).unwrap();
        let err = OutputDir::prepare(&dir, Format::Tsv, true).unwrap_err().to_string();
        // One line that says what to do (issue 38: it was "Too many levels of symbolic links").
        assert!(err.contains(LOCK_NAME) && err.contains("symbolic link") && err.contains("rm "), "{err}");
        assert!(!err.contains('\n'), "{err}");
        assert!(nowhere.symlink_metadata().is_err());
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_file(&victim).unwrap();
    }

    /// A `NAME.part` a killed run left is removed when the next run takes the directory.
    #[test]
    fn incomplete_files_of_a_killed_run_are_removed() {
        let dir = scratch("stale");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("tcp_flows.tsv.part"), b"c_ip\tc_po").unwrap();
        fs::write(dir.join("notes.part"), b"not ours").unwrap();
        let out = OutputDir::prepare(&dir, Format::Tsv, false).unwrap();
        assert_eq!(names(&dir), [LOCK_NAME, "notes.part"]);
        out.write_flow_lines(&[FlowLines::default()]).unwrap();
        drop(out);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// write_intervals writes what sonde-stats renders, byte for byte, and names the files.
    #[test]
    fn interval_files_are_the_rendered_ones() {
        let dir = scratch("intervals");
        let out = OutputDir::prepare(&dir, Format::Tsv, false).unwrap();
        let cfg = sonde_stats::Config { interval_ns: 1_000_000_000, ..sonde_stats::Config::default() };
        let report = sonde_stats::Report::new(&cfg, Vec::new(), Vec::new());
        let written = out.write_intervals(&report).unwrap();
        assert_eq!(written, OutputFile::INTERVALS);
        for (name, text) in report.render().unwrap() {
            assert_eq!(fs::read_to_string(dir.join(name)).unwrap(), text, "{name}");
        }
        assert_eq!(names(&dir), [LOCK_NAME, "histograms.tsv", "intervals.tsv", "quantiles.tsv"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// write_definitions writes what the counter renders, and only the files it asks for.
    #[test]
    fn definition_files_follow_what_the_definitions_ask() {
        let defs = |text: &str| {
            sonde_define::Counter::new(
                sonde_define::parse_definitions(text, sonde_define::MAX_NAME_BYTES).unwrap(),
                Some(1_000_000_000),
                100,
            )
        };
        let dir = scratch("definitions");
        let out = OutputDir::prepare(&dir, Format::Tsv, false).unwrap();
        let plain = defs("tcp = ip.proto == 6\n");
        assert_eq!(out.write_definitions(&plain).unwrap(), [OutputFile::Definitions]);
        let mut expected = String::new();
        plain.write_tsv(&mut expected);
        assert_eq!(fs::read_to_string(dir.join("definitions.tsv")).unwrap(), expected);
        let measured = defs("ports = ip.proto == 6 key tcp.dport measure gap,length idle 1s\n");
        assert_eq!(
            out.write_definitions(&measured).unwrap(),
            [
                OutputFile::Definitions,
                OutputFile::DefinitionGaps,
                OutputFile::DefinitionGapHistogram,
                OutputFile::DefinitionFlows
            ]
        );
        let mut expected = String::new();
        measured.flows_table().write_tsv(&mut expected);
        assert_eq!(fs::read_to_string(dir.join("definition_flows.tsv")).unwrap(), expected);
        assert_eq!(names(&dir).len(), 5, "{:?}", names(&dir));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn capture_and_summary_files() {
        let dir = scratch("capture");
        let out = OutputDir::prepare(&dir, Format::Tsv, false).unwrap();
        let c = CaptureCounters { received_pkts: 5, dropped_pkts: 1, if_dropped_pkts: 0 };
        assert_eq!(out.write_capture(&[(0, c)], 1_000_000_000).unwrap(), OutputFile::Capture);
        assert_eq!(fs::read_to_string(dir.join("capture.tsv")).unwrap(), capture_tsv(&[(0, c)], 1_000_000_000));
        let outcome = sonde_engine::Outcome { stats: sonde_engine::RunStats::default(), input_error: None };
        let timing = crate::summary::Timing::from(sonde_engine::Timing::default());
        let input = crate::summary::Input { name: "x.pcap".into(), format: "pcap".into(), ..Default::default() };
        let summary = Summary::new(input, outcome, timing);
        assert_eq!(out.write_run_summary(&summary).unwrap(), OutputFile::Summary);
        let text = fs::read_to_string(dir.join("summary.json")).unwrap();
        assert_eq!(text, summary.to_json());
        assert!(text.starts_with("{\n  \"sonde_version\": ") && text.ends_with("}\n"), "{text}");
        assert_eq!(names(&dir), [LOCK_NAME, "capture.tsv", "summary.json"]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
