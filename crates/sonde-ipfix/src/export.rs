//! The exporting process: one thread owns the encoder and the socket or file; the workers'
//! sinks hand it records through a bounded queue. Nothing here can stop an analysis: a
//! collector that is absent or refuses costs counted messages, a full queue counted records.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use sonde_flow::{FlowRecord, FlowSink, RttSample};

use crate::encoder::{is_template_message, sequence_of, Encoder, EncoderConfig};

/// Records the queue holds; beyond, a sink waits [`QUEUE_WAIT`] then drops the record.
pub const QUEUE_RECORDS: usize = 16_384;
/// How long a worker waits for room in a full queue: long enough to ride out a hiccup. Once a
/// wait has ended in a drop, the worker stops waiting (drops at once) until a record gets in
/// again, so a stuck exporter costs each worker one wait, not one per flow.
pub const QUEUE_WAIT: Duration = Duration::from_millis(10);
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

impl Target {
    /// `udp://HOST:PORT`, `tcp://HOST:PORT` or a file path.
    pub fn parse(s: &str) -> Result<Target, String> {
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
    Finish,
}

/// The exporting process. Dropping it without [`Exporter::finish`] still flushes.
pub struct Exporter {
    tx: Sender<Msg>,
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<ExportStats>>,
}

/// A worker's handle on the exporter: a [`FlowSink`] that queues each record.
#[derive(Clone)]
pub struct ExportSink {
    tx: Sender<Msg>,
    dropped: Arc<AtomicU64>,
    /// The last record was dropped: do not wait for room until one gets in.
    congested: bool,
}

impl FlowSink for ExportSink {
    /// Sent as a flow's record, its flowEndReason activeTimeout.
    fn interim(&mut self, record: &FlowRecord) {
        self.flow(record);
    }
    fn flow(&mut self, record: &FlowRecord) {
        let msg = Msg::Flow(Box::new(record.clone()));
        let sent =
            if self.congested { self.tx.try_send(msg).is_ok() } else { self.tx.send_timeout(msg, QUEUE_WAIT).is_ok() };
        self.congested = !sent;
        if !sent {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
}

impl Exporter {
    /// Opens the file or socket and starts the thread. Only what makes the target unusable from
    /// the start is an error (a file that cannot be created, a UDP socket that cannot be made);
    /// a TCP collector that refuses is retried and counted.
    pub fn start(target: &Target, cfg: EncoderConfig) -> Result<Exporter, String> {
        let mut cfg = cfg;
        if !matches!(target, Target::Udp(_)) {
            // A stream keeps the templates: once at the start (and on each new connection).
            (cfg.refresh_messages, cfg.refresh_ns) = (None, None);
        }
        let encoder = Encoder::new(cfg)?;
        let transport = Transport::open(target)?;
        let (tx, rx) = bounded(QUEUE_RECORDS);
        let dropped = Arc::new(AtomicU64::new(0));
        let thread = std::thread::Builder::new()
            .name("sonde-ipfix".into())
            .spawn(move || export_loop(rx, encoder, transport))
            .map_err(|e| format!("starting the IPFIX exporter: {e}"))?;
        Ok(Exporter { tx, dropped, thread: Some(thread) })
    }

    pub fn sink(&self) -> ExportSink {
        ExportSink { tx: self.tx.clone(), dropped: self.dropped.clone(), congested: false }
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

fn export_loop(rx: Receiver<Msg>, mut encoder: Encoder, mut transport: Transport) -> ExportStats {
    let mut stats = ExportStats::default();
    let mut out = Vec::new();
    loop {
        match rx.recv_timeout(IDLE_FLUSH) {
            Ok(Msg::Flow(r)) => encoder.push(&r, &mut out),
            Err(RecvTimeoutError::Timeout) => encoder.flush(&mut out),
            Ok(Msg::Finish) | Err(RecvTimeoutError::Disconnected) => break,
        }
        send_all(&mut out, &encoder, &mut transport, &mut stats);
    }
    encoder.flush(&mut out);
    send_all(&mut out, &encoder, &mut transport, &mut stats);
    if let Err(e) = transport.flush() {
        stats.last_error = Some(e);
    }
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
    Udp(UdpSocket),
    Tcp { addr: SocketAddr, stream: Option<TcpStream>, fresh: bool, retry_at: Instant },
    File(BufWriter<File>),
}

impl Transport {
    fn open(target: &Target) -> Result<Transport, String> {
        Ok(match target {
            Target::Udp(addr) => {
                let local: SocketAddr =
                    if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
                let socket = UdpSocket::bind(local).map_err(|e| format!("--ipfix {target}: {e}"))?;
                socket.connect(addr).map_err(|e| format!("--ipfix {target}: {e}"))?;
                Transport::Udp(socket)
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
            Transport::Udp(s) => match s.send(msg) {
                Ok(n) if n == msg.len() => Ok(()),
                Ok(n) => Err(format!("sent {n} of {} bytes", msg.len())),
                Err(e) => Err(e.to_string()),
            },
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
