//! The exporting process: one thread owns the encoder and the socket or file; the workers'
//! sinks hand it records through a bounded queue. Nothing here can stop an analysis: a
//! collector that is absent or refuses costs counted messages; a full queue costs a live run
//! counted records, and a trace's run the time to drain it ([`FullQueue`]). Over UDP, messages
//! are paced ([`ExportOptions::udp_rate`]) so that a flush of many flows at once does not
//! overflow the collector's socket buffer, where the kernel would drop them uncounted.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use sonde_flow::{FlowRecord, FlowSink, IcmpRecord, RttSample};

use crate::encoder::{is_template_message, sequence_of, Encoder, EncoderConfig};

/// Records the queue holds; beyond, a sink waits for room ([`FullQueue`]).
pub const QUEUE_RECORDS: usize = 16_384;
/// [`FullQueue::DropAfterWait`]: how long a worker waits for room in a full queue, long enough
/// to ride out a hiccup. Once a wait has ended in a drop, the worker stops waiting (drops at
/// once) until a record gets in again, so a stuck exporter costs each worker one wait, not one
/// per flow.
pub const QUEUE_WAIT: Duration = Duration::from_millis(10);
/// UDP messages a second by default ([`ExportOptions::udp_rate`]): 7 MB/s of 1400-byte
/// messages, about 20,000 TCP records a second; a collector's default socket buffer (about 90
/// messages) then rides out 15 ms without reading. docs/performance.md ("Export") has the
/// measurements it comes from.
pub const DEFAULT_UDP_RATE: u32 = 5_000;
/// UDP: messages that may leave back to back before the pacing holds the next, a small part of
/// what a collector's default socket buffer holds (Linux's 208 KiB: about 90 messages of 1400
/// bytes).
pub const UDP_BURST: u32 = 16;
/// A partly filled message goes out after this much wall time without a new record, so a quiet
/// live run still exports (message boundaries only; the records are the same).
const IDLE_FLUSH: Duration = Duration::from_secs(1);
/// TCP: time to connect or write before the collector counts as unreachable, and the wait
/// before the next connection attempt.
const TCP_TIMEOUT: Duration = Duration::from_secs(2);
const TCP_RETRY: Duration = Duration::from_secs(1);

/// Where the messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Udp(SocketAddr),
    Tcp(SocketAddr),
    /// RFC 5655: the message stream as it would go over TCP.
    File(PathBuf),
}

/// Why an export cannot start; the message names the target or the setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not `udp://HOST:PORT`, `tcp://HOST:PORT` or a file path.
    Target(String),
    /// A setting the encoder or the exporter refuses (the message size, the UDP rate).
    Settings(String),
    /// The file or socket could not be opened, or the exporter's thread started.
    Start(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Target(m) | Error::Settings(m) | Error::Start(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl Target {
    /// `udp://HOST:PORT`, `tcp://HOST:PORT` or a file path.
    pub fn parse(s: &str) -> Result<Target, Error> {
        Target::read(s).map_err(Error::Target)
    }

    fn read(s: &str) -> Result<Target, String> {
        let addr = |rest: &str| -> Result<SocketAddr, String> {
            let mut addrs = rest.to_socket_addrs().map_err(|e| format!("--ipfix {s}: {e} (want HOST:PORT)"))?;
            addrs.next().ok_or_else(|| format!("--ipfix {s}: no address"))
        };
        if let Some(rest) = s.strip_prefix("udp://") {
            Ok(Target::Udp(addr(rest)?))
        } else if let Some(rest) = s.strip_prefix("tcp://") {
            Ok(Target::Tcp(addr(rest)?))
        } else if s.contains("://") {
            Err(format!("--ipfix {s}: unknown scheme (udp://HOST:PORT, tcp://HOST:PORT or a file path)"))
        } else if s.is_empty() {
            Err("--ipfix needs udp://HOST:PORT, tcp://HOST:PORT or a file path".into())
        } else {
            Ok(Target::File(PathBuf::from(s)))
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Udp(a) => write!(f, "udp://{a}"),
            Target::Tcp(a) => write!(f, "tcp://{a}"),
            Target::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// What a worker's sink does when the exporter's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullQueue {
    /// Wait until there is room: nothing is lost, the worker runs at the exporter's pace. For a
    /// trace, which waits as well as it is read.
    Wait,
    /// Wait [`QUEUE_WAIT`], then drop the record and count it. For live capture, where a worker
    /// held up loses packets instead.
    DropAfterWait,
}

/// How the exporting process sends; what the messages hold is [`EncoderConfig`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    /// UDP: at most this many messages a second, at most [`UDP_BURST`] back to back (`None`: as
    /// fast as the socket takes them). UDP has no flow control: a collector's socket buffer
    /// that fills drops what comes next, silently, so a burst larger than it holds is lost
    /// unless the collector reads as fast as the exporter sends.
    pub udp_rate: Option<u32>,
    pub full_queue: FullQueue,
}

impl Default for ExportOptions {
    /// Paced UDP; a full queue drops after [`QUEUE_WAIT`] (right for live capture).
    fn default() -> Self {
        ExportOptions { udp_rate: Some(DEFAULT_UDP_RATE), full_queue: FullQueue::DropAfterWait }
    }
}

/// What an export did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Messages handed to the socket or file (templates included), their bytes, and the data
    /// records in them.
    pub messages: u64,
    pub bytes: u64,
    pub records: u64,
    /// Records dropped because the queue stayed full.
    pub dropped_records: u64,
    /// Messages that could not be sent (collector absent, refusing, a write error) and the
    /// records in them.
    pub failed_messages: u64,
    pub failed_records: u64,
    /// The last send error, if any.
    pub last_error: Option<String>,
}

enum Msg {
    Flow(Box<FlowRecord>),
    Icmp(Box<IcmpRecord>),
    Finish,
}

/// The exporting process. Dropping it without [`Exporter::finish`] still flushes.
pub struct Exporter {
    tx: Sender<Msg>,
    dropped: Arc<AtomicU64>,
    /// The thread's counters as of its last message sent.
    live: Arc<Mutex<ExportStats>>,
    full_queue: FullQueue,
    thread: Option<JoinHandle<ExportStats>>,
}

/// A worker's handle on the exporter: a [`FlowSink`] that queues each record, ICMP entries'
/// included.
#[derive(Clone)]
pub struct ExportSink {
    tx: Sender<Msg>,
    dropped: Arc<AtomicU64>,
    full_queue: FullQueue,
    /// The last record was dropped: do not wait for room until one gets in.
    congested: bool,
}

impl FlowSink for ExportSink {
    /// Sent as a flow's record, its flowEndReason activeTimeout.
    fn interim(&mut self, record: &FlowRecord) {
        self.flow(record);
    }
    fn flow(&mut self, record: &FlowRecord) {
        self.queue(Msg::Flow(Box::new(record.clone())));
    }
    fn icmp(&mut self, record: &IcmpRecord) {
        self.queue(Msg::Icmp(Box::new(record.clone())));
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
}

impl ExportSink {
    fn queue(&mut self, msg: Msg) {
        let sent = match (self.full_queue, self.congested) {
            // Fails only once the exporter is gone.
            (FullQueue::Wait, _) => self.tx.send(msg).is_ok(),
            (FullQueue::DropAfterWait, false) => self.tx.send_timeout(msg, QUEUE_WAIT).is_ok(),
            (FullQueue::DropAfterWait, true) => self.tx.try_send(msg).is_ok(),
        };
        self.congested = !sent;
        if !sent {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Exporter {
    /// [`Exporter::start_with`] the default [`ExportOptions`]: paced UDP, a full queue drops.
    pub fn start(target: &Target, cfg: EncoderConfig) -> Result<Exporter, Error> {
        Exporter::start_with(target, cfg, ExportOptions::default())
    }

    /// Opens the file or socket and starts the thread. Only what makes the target unusable from
    /// the start is an error (a file that cannot be created, a UDP socket that cannot be made, a
    /// rate of 0); a TCP collector that refuses is retried and counted.
    pub fn start_with(target: &Target, cfg: EncoderConfig, options: ExportOptions) -> Result<Exporter, Error> {
        let mut cfg = cfg;
        if !matches!(target, Target::Udp(_)) {
            // A stream keeps the templates: once at the start (and on each new connection).
            (cfg.refresh_messages, cfg.refresh_ns) = (None, None);
        }
        let encoder = Encoder::new(cfg)?;
        if options.udp_rate == Some(0) {
            return Err(Error::Settings("the IPFIX UDP rate must be at least 1 message a second".into()));
        }
        let transport = Transport::open(target, options.udp_rate.map(Pacer::new)).map_err(Error::Start)?;
        let (tx, rx) = bounded(QUEUE_RECORDS);
        let dropped = Arc::new(AtomicU64::new(0));
        let live = Arc::new(Mutex::new(ExportStats::default()));
        let shared = live.clone();
        let thread = std::thread::Builder::new()
            .name("sonde-ipfix".into())
            .spawn(move || export_loop(rx, encoder, transport, &shared))
            .map_err(|e| Error::Start(format!("starting the IPFIX exporter: {e}")))?;
        Ok(Exporter { tx, dropped, live, full_queue: options.full_queue, thread: Some(thread) })
    }

    pub fn sink(&self) -> ExportSink {
        ExportSink { tx: self.tx.clone(), dropped: self.dropped.clone(), full_queue: self.full_queue, congested: false }
    }

    /// The counters, readable while the run goes on (`/metrics`).
    pub fn live(&self) -> LiveStats {
        LiveStats { stats: self.live.clone(), dropped: self.dropped.clone() }
    }

    /// Sends what is queued, flushes, and returns the counters.
    pub fn finish(mut self) -> ExportStats {
        self.stop()
    }

    fn stop(&mut self) -> ExportStats {
        let Some(thread) = self.thread.take() else { return ExportStats::default() };
        // Blocks until the thread has room: every record queued before goes out first.
        let _ = self.tx.send(Msg::Finish);
        let mut stats = thread.join().unwrap_or_else(|_| ExportStats {
            last_error: Some("the IPFIX exporter thread panicked".into()),
            ..ExportStats::default()
        });
        stats.dropped_records += self.dropped.load(Ordering::Relaxed);
        stats
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Spaces UDP sends to a rate, letting [`UDP_BURST`] messages leave back to back (the generic
/// cell rate algorithm: a message is due one interval after the previous one's due time, and an
/// idle spell earns at most a burst). Sleeps in the exporting thread; the queue in front of it
/// absorbs the workers' bursts.
struct Pacer {
    interval: Duration,
    /// The credit an idle spell can earn: `UDP_BURST` intervals.
    burst: Duration,
    /// When the next message is due.
    due: Instant,
}

impl Pacer {
    fn new(rate: u32) -> Pacer {
        let interval = Duration::from_secs(1) / rate;
        Pacer { interval, burst: interval * UDP_BURST, due: Instant::now() }
    }

    /// Waits until the next message may go.
    fn wait(&mut self) {
        let now = Instant::now();
        self.due = self.due.max(now.checked_sub(self.burst).unwrap_or(now));
        if self.due > now {
            // An oversleep is made up by the messages after it, which find themselves late.
            std::thread::sleep(self.due - now);
        }
        self.due += self.interval;
    }
}

/// The exporter's counters as they move: the thread's as of its last message, and the drops.
#[derive(Clone)]
pub struct LiveStats {
    stats: Arc<Mutex<ExportStats>>,
    dropped: Arc<AtomicU64>,
}

impl LiveStats {
    pub fn stats(&self) -> ExportStats {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
        stats.dropped_records += self.dropped.load(Ordering::Relaxed);
        stats
    }
}

fn export_loop(
    rx: Receiver<Msg>,
    mut encoder: Encoder,
    mut transport: Transport,
    live: &Mutex<ExportStats>,
) -> ExportStats {
    let mut stats = ExportStats::default();
    let mut out = Vec::new();
    loop {
        match rx.recv_timeout(IDLE_FLUSH) {
            Ok(Msg::Flow(r)) => encoder.push(&r, &mut out),
            Ok(Msg::Icmp(r)) => encoder.push_icmp(&r, &mut out),
            Err(RecvTimeoutError::Timeout) => encoder.flush(&mut out),
            Ok(Msg::Finish) | Err(RecvTimeoutError::Disconnected) => break,
        }
        // Once per message, not per record.
        if !out.is_empty() {
            send_all(&mut out, &encoder, &mut transport, &mut stats);
            *live.lock().unwrap_or_else(|e| e.into_inner()) = stats.clone();
        }
    }
    encoder.flush(&mut out);
    send_all(&mut out, &encoder, &mut transport, &mut stats);
    if let Err(e) = transport.flush() {
        stats.last_error = Some(e);
    }
    *live.lock().unwrap_or_else(|e| e.into_inner()) = stats.clone();
    stats
}

/// Data records in a message, from its data sets' lengths (records have fixed lengths).
fn data_records(msg: &[u8], encoder: &Encoder) -> u64 {
    let mut n = 0;
    let mut at = crate::encoder::HEADER_LEN;
    while at + 4 <= msg.len() {
        let id = u16::from_be_bytes([msg[at], msg[at + 1]]);
        let len = usize::from(u16::from_be_bytes([msg[at + 2], msg[at + 3]]));
        if let Some(t) = encoder.templates().iter().find(|t| t.id == id) {
            n += (len.saturating_sub(4) / t.record_len) as u64;
        }
        at += len.max(4);
    }
    n
}

fn send_all(out: &mut Vec<Vec<u8>>, encoder: &Encoder, transport: &mut Transport, stats: &mut ExportStats) {
    for msg in out.drain(..) {
        let records = data_records(&msg, encoder);
        // A new TCP connection starts with the templates, numbered as the message they precede.
        if transport.needs_templates() && !is_template_message(&msg) {
            for t in encoder.template_messages(u64::from(sequence_of(&msg).unwrap_or(0))) {
                send_one(&t, 0, transport, stats);
            }
        }
        send_one(&msg, records, transport, stats);
    }
}

fn send_one(msg: &[u8], records: u64, transport: &mut Transport, stats: &mut ExportStats) {
    match transport.send(msg) {
        Ok(()) => {
            stats.messages += 1;
            stats.bytes += msg.len() as u64;
            stats.records += records;
        }
        Err(e) => {
            stats.failed_messages += 1;
            stats.failed_records += records;
            stats.last_error = Some(e);
        }
    }
}

enum Transport {
    /// The pacing: none when unlimited.
    Udp(UdpSocket, Option<Pacer>),
    Tcp {
        addr: SocketAddr,
        stream: Option<TcpStream>,
        fresh: bool,
        retry_at: Instant,
    },
    File(BufWriter<File>),
}

impl Transport {
    /// `pacer` applies to UDP only: TCP has its flow control, a file no collector.
    fn open(target: &Target, pacer: Option<Pacer>) -> Result<Transport, String> {
        Ok(match target {
            Target::Udp(addr) => {
                let local: SocketAddr =
                    if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
                let socket = UdpSocket::bind(local).map_err(|e| format!("--ipfix {target}: {e}"))?;
                socket.connect(addr).map_err(|e| format!("--ipfix {target}: {e}"))?;
                Transport::Udp(socket, pacer)
            }
            Target::Tcp(addr) => Transport::Tcp { addr: *addr, stream: None, fresh: false, retry_at: Instant::now() },
            Target::File(path) => {
                let file = File::create(path).map_err(|e| format!("--ipfix {}: {e}", path.display()))?;
                Transport::File(BufWriter::new(file))
            }
        })
    }

    /// Connects a TCP transport if it is down and due a retry; true when the next message is
    /// the first on a new connection.
    fn needs_templates(&mut self) -> bool {
        if let Transport::Tcp { addr, stream, fresh, retry_at } = self {
            if stream.is_none() && Instant::now() >= *retry_at {
                match TcpStream::connect_timeout(addr, TCP_TIMEOUT) {
                    Ok(s) => {
                        let _ = s.set_write_timeout(Some(TCP_TIMEOUT));
                        let _ = s.set_nodelay(true);
                        (*stream, *fresh) = (Some(s), true);
                    }
                    Err(_) => *retry_at = Instant::now() + TCP_RETRY,
                }
            }
            return *fresh;
        }
        false
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), String> {
        match self {
            Transport::Udp(s, pacer) => {
                if let Some(p) = pacer {
                    p.wait();
                }
                match s.send(msg) {
                    Ok(n) if n == msg.len() => Ok(()),
                    Ok(n) => Err(format!("sent {n} of {} bytes", msg.len())),
                    Err(e) => Err(e.to_string()),
                }
            }
            Transport::Tcp { addr, stream, fresh, retry_at } => {
                let Some(s) = stream.as_mut() else {
                    return Err(format!("tcp://{addr}: not connected"));
                };
                match s.write_all(msg) {
                    Ok(()) => {
                        *fresh = false;
                        Ok(())
                    }
                    Err(e) => {
                        // Drop the connection; the next attempt starts with templates.
                        (*stream, *retry_at) = (None, Instant::now() + TCP_RETRY);
                        Err(format!("tcp://{addr}: {e}"))
                    }
                }
            }
            Transport::File(w) => w.write_all(msg).map_err(|e| e.to_string()),
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        match self {
            Transport::File(w) => w.flush().map_err(|e| e.to_string()),
            Transport::Tcp { stream: Some(s), .. } => s.flush().map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    }
}
