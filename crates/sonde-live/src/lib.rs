//! sonde-live: capture from network interfaces, as a [`PacketSource`] the engine reads like a
//! file.
//!
//! Two back ends: Linux AF_PACKET with a TPACKET_V3 memory-mapped ring (the fast path: frames
//! are read in place, kernel timestamps in ns, no system call per frame) and libpcap (the
//! portable path, nanosecond precision, its buffer size settable). Several interfaces are read
//! as one source: of the frames ready on each, the oldest goes first, so the merged stream is
//! in time order up to what the kernel has handed over (a frame still in an unfinished block
//! may come after a younger one from another interface; the engine's clock only moves forward
//! and counts such a frame in its own interval).
//!
//! **The capture is the clock.** This is the one place where the wall clock enters sonde:
//! when no frame came for [`Config::tick_ns`] of wall time, the source pauses with a tick
//! ([`PacketSource::tick`]) saying packet time has reached the wall clock less a margin
//! (`TICK_LAG_NS`, longer than a ring block's timeout, so frames still to come are not older).
//! Between frames it ticks at the latest frame's time, at most every `tick_ns`, so that every
//! worker hears the time. Downstream everything runs on the time it is given.
//!
//! The capture ends when the stop flag is raised ([`stop_on_signals`]: SIGINT, SIGTERM):
//! frames already captured are read until none is left (at least `DRAIN_NS`, at most
//! `MAX_DRAIN_NS`: those still unread then are counted), the kernel's counters are read a
//! last time ([`LiveSource::counters`]) and the source says it ended.
//!
//! ```no_run
//! use sonde_capture::PacketSource;
//! let stop = sonde_live::stop_on_signals().unwrap();
//! let cfg = sonde_live::Config::new(vec!["eth0".into()]);
//! let mut source = sonde_live::LiveSource::open(&cfg, stop).unwrap();
//! while let Ok(Some(frame)) = source.next_frame() {
//!     println!("{} {}", frame.ts_ns, frame.wire_len);
//! }
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

use std::collections::BTreeMap;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use sonde_capture::{CaptureError, Frame, PacketSource};

mod blocks;
mod iface;
mod libpcap;
mod privileges;
mod ring;
mod until_stopped;

pub use privileges::drop_to_user;
pub use until_stopped::UntilStopped;

/// How long a tick lags the wall clock: more than a ring block's timeout and libpcap's buffer
/// timeout, so a frame captured before the tick but not handed over yet is not older than it.
const TICK_LAG_NS: u64 = 50_000_000;
/// After the stop flag rises, frames already captured are still read until none is ready and
/// at least this long has passed (so the block the kernel was filling is handed over)...
const DRAIN_NS: u64 = 3 * ring::BLOCK_TIMEOUT_MS as u64 * 1_000_000;
/// ...but no longer than this, however fast frames keep coming; those left are counted
/// (`Counters::unread_pkts`).
const MAX_DRAIN_NS: u64 = 2_000_000_000;
/// Frames between looks at the wall clock and the stop flag while frames keep coming.
const CLOCK_EVERY: u64 = 1024;

/// Which capture mechanism reads the interfaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Linux AF_PACKET, TPACKET_V3 ring.
    AfPacket,
    /// libpcap.
    Pcap,
}

/// What to capture and how.
#[derive(Debug, Clone)]
pub struct Config {
    pub interfaces: Vec<String>,
    pub backend: Backend,
    /// Per interface: the ring's size (AF_PACKET) or libpcap's buffer.
    pub buffer_bytes: usize,
    pub promisc: bool,
    /// Wall time without a frame after which the source ticks.
    pub tick_ns: u64,
    /// The monitoring interval, to add the counters up per interval (see
    /// [`LiveSource::interval_counters`]).
    pub interval_ns: Option<u64>,
}

/// The PACKET_FANOUT group of one interface's sockets in one process: group ids are shared by
/// the whole network namespace, so the process id is part of it.
fn fanout_group(interface_index: usize) -> u16 {
    ((std::process::id() as u16) << 4).wrapping_add(interface_index as u16)
}

impl Config {
    /// AF_PACKET, 64 MiB per interface, not promiscuous, a tick after 100 ms.
    pub fn new(interfaces: Vec<String>) -> Config {
        Config {
            interfaces,
            backend: Backend::AfPacket,
            buffer_bytes: 64 << 20,
            promisc: false,
            tick_ns: 100_000_000,
            interval_ns: None,
        }
    }
}

/// The kernel's (or libpcap's) counters for one interface since the capture opened, or for
/// every interface over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets the socket was offered (AF_PACKET tp_packets, including the dropped; libpcap
    /// ps_recv).
    pub received_pkts: u64,
    /// Dropped because the ring or buffer was full (tp_drops, ps_drop).
    pub dropped_pkts: u64,
    /// Dropped by the interface or its driver (libpcap ps_ifdrop; AF_PACKET does not say).
    pub if_dropped_pkts: u64,
    /// Offered, kept by the kernel, and still unread when the capture stopped: the drain after
    /// the stop (up to `MAX_DRAIN_NS`) did not reach them (AF_PACKET only).
    pub unread_pkts: u64,
}

impl Counters {
    pub fn add(&mut self, other: Counters) {
        self.received_pkts += other.received_pkts;
        self.dropped_pkts += other.dropped_pkts;
        self.if_dropped_pkts += other.if_dropped_pkts;
        self.unread_pkts += other.unread_pkts;
    }

    /// Each counter at the larger of the two.
    fn max(self, other: Counters) -> Counters {
        Counters {
            received_pkts: self.received_pkts.max(other.received_pkts),
            dropped_pkts: self.dropped_pkts.max(other.dropped_pkts),
            if_dropped_pkts: self.if_dropped_pkts.max(other.if_dropped_pkts),
            unread_pkts: self.unread_pkts.max(other.unread_pkts),
        }
    }

    fn since(self, before: Counters) -> Counters {
        Counters {
            received_pkts: self.received_pkts.saturating_sub(before.received_pkts),
            dropped_pkts: self.dropped_pkts.saturating_sub(before.dropped_pkts),
            if_dropped_pkts: self.if_dropped_pkts.saturating_sub(before.if_dropped_pkts),
            unread_pkts: self.unread_pkts.saturating_sub(before.unread_pkts),
        }
    }
}

/// Why capture could not start, in terms a user can act on.
#[derive(Debug)]
pub enum LiveError {
    NoSuchInterface(String),
    InterfaceDown(String),
    Permission {
        interface: String,
    },
    UnsupportedLink {
        interface: String,
        arphrd: u16,
    },
    Os {
        interface: String,
        what: &'static str,
        error: io::Error,
    },
    Pcap {
        interface: String,
        message: String,
    },
    NoInterface,
    /// Several readers need AF_PACKET's fanout groups.
    FanoutNeedsAfPacket,
    NoSuchUser(String),
    Privileges {
        user: String,
        error: io::Error,
    },
}

impl LiveError {
    fn os(interface: &str, what: &'static str, error: io::Error) -> LiveError {
        LiveError::Os { interface: interface.to_string(), what, error }
    }
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveError::NoSuchInterface(i) => write!(f, "{i}: no such interface (see `ip link`)"),
            LiveError::InterfaceDown(i) => write!(f, "{i}: interface is down (`ip link set {i} up`)"),
            LiveError::Permission { interface } => write!(
                f,
                "{interface}: no permission to capture: run as root (add --user NAME to drop to NAME \
                 once the capture is open), or give the binary the capability once: \
                 setcap cap_net_raw,cap_net_admin=eip $(command -v sonde)"
            ),
            LiveError::UnsupportedLink { interface, arphrd } => write!(
                f,
                "{interface}: link type ARPHRD {arphrd} is not read by the AF_PACKET path; try --capture pcap"
            ),
            LiveError::Os { interface, what, error } => write!(f, "{interface}: {what}: {error}"),
            LiveError::Pcap { interface, message } => write!(f, "{interface}: libpcap: {message}"),
            LiveError::NoInterface => write!(f, "no interface to capture on"),
            LiveError::FanoutNeedsAfPacket => {
                write!(f, "several readers (--readers) need --capture afpacket (PACKET_FANOUT)")
            }
            LiveError::NoSuchUser(u) => write!(f, "--user {u}: no such user"),
            LiveError::Privileges { user, error } => write!(f, "cannot drop privileges to {user}: {error}"),
        }
    }
}

impl std::error::Error for LiveError {}

/// One interface's capture.
enum Port {
    Ring(ring::Ring),
    Pcap(libpcap::PcapPort),
}

impl Port {
    #[inline]
    fn ready(&mut self) -> Result<Option<u64>, CaptureError> {
        match self {
            Port::Ring(r) => Ok(r.ready()),
            Port::Pcap(p) => p.ready(),
        }
    }

    #[inline]
    fn take(&mut self) -> Option<Frame<'_>> {
        match self {
            Port::Ring(r) => r.take(),
            Port::Pcap(p) => Some(p.take()),
        }
    }

    /// Frames handed over and not read yet (libpcap's buffer cannot be looked into: 0).
    fn unread(&self) -> u64 {
        match self {
            Port::Ring(r) => r.unread(),
            Port::Pcap(_) => 0,
        }
    }

    fn update_counters(&mut self) -> Counters {
        match self {
            Port::Ring(r) => r.update_counters(),
            Port::Pcap(p) => p.update_counters(),
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Port::Ring(r) => r.fd(),
            Port::Pcap(p) => p.fd(),
        }
    }
}

/// Live interfaces as one [`PacketSource`].
pub struct LiveSource {
    names: Vec<String>,
    ports: Vec<Port>,
    counters: Vec<Counters>,
    /// Per interface, what the intervals have counted so far.
    interval_counted: Vec<Counters>,
    interval_ns: Option<u64>,
    /// Every interface's counters added up by interval index of packet time.
    per_interval: BTreeMap<u64, Counters>,
    stop: &'static AtomicBool,
    format: &'static str,
    tick_ns: u64,
    /// Wall time of the next tick.
    next_tick_wall_ns: u64,
    /// The wall time the stop flag was first seen at: the drain counts from it.
    stop_at_wall_ns: Option<u64>,
    /// The latest frame time handed out, and the latest tick.
    last_frame_ns: u64,
    clock_ns: u64,
    frames: u64,
    bytes: u64,
    pending_tick: Option<u64>,
    ended: bool,
}

impl LiveSource {
    /// Opens every interface of `cfg` (each must exist and be up). Reading ends when `stop`
    /// rises.
    pub fn open(cfg: &Config, stop: &'static AtomicBool) -> Result<LiveSource, LiveError> {
        Self::open_in(cfg, stop, false)
    }

    /// `readers` sources over the same interfaces, each interface's sockets in one PACKET_FANOUT
    /// group: every frame reaches one of them, both directions of a flow the same one (AF_PACKET
    /// only). Each source is read by a reader of its own.
    pub fn open_fanout(cfg: &Config, readers: usize, stop: &'static AtomicBool) -> Result<Vec<LiveSource>, LiveError> {
        if cfg.backend != Backend::AfPacket {
            return Err(LiveError::FanoutNeedsAfPacket);
        }
        (0..readers.max(1)).map(|_| Self::open_in(cfg, stop, true)).collect()
    }

    fn open_in(cfg: &Config, stop: &'static AtomicBool, fanout: bool) -> Result<LiveSource, LiveError> {
        if cfg.interfaces.is_empty() {
            return Err(LiveError::NoInterface);
        }
        let mut ports = Vec::with_capacity(cfg.interfaces.len());
        for (i, name) in cfg.interfaces.iter().enumerate() {
            let iface = iface::lookup(name)?;
            let group = fanout.then(|| fanout_group(i));
            ports.push(match cfg.backend {
                Backend::AfPacket => Port::Ring(ring::Ring::open(&iface, cfg.buffer_bytes, cfg.promisc, group)?),
                Backend::Pcap => Port::Pcap(libpcap::PcapPort::open(&iface, cfg.buffer_bytes, cfg.promisc)?),
            });
        }
        Ok(LiveSource {
            names: cfg.interfaces.clone(),
            counters: vec![Counters::default(); ports.len()],
            interval_counted: vec![Counters::default(); ports.len()],
            interval_ns: cfg.interval_ns.filter(|&n| n > 0),
            per_interval: BTreeMap::new(),
            ports,
            stop,
            format: match cfg.backend {
                Backend::AfPacket => "live-afpacket-v3",
                Backend::Pcap => "live-libpcap",
            },
            tick_ns: cfg.tick_ns.max(1_000_000),
            next_tick_wall_ns: wall_ns().saturating_add(cfg.tick_ns),
            stop_at_wall_ns: None,
            last_frame_ns: 0,
            clock_ns: 0,
            frames: 0,
            bytes: 0,
            pending_tick: None,
            ended: false,
        })
    }

    /// Per interface (in the order given): its name and counters as last read (at each tick
    /// and at the end).
    pub fn counters(&self) -> Vec<(String, Counters)> {
        self.names.iter().cloned().zip(self.counters.iter().copied()).collect()
    }

    /// Every interface's counters, added up per interval: (start of the interval in ns,
    /// counters). The counters are read at each tick and at the end, and what changed since
    /// the last read goes to the interval of the packet time then; so an interval holds the
    /// drops read in it, up to one tick (`tick_ns`, or 1,024 frames) late.
    pub fn interval_counters(&self) -> Vec<(u64, Counters)> {
        let interval_ns = self.interval_ns.unwrap_or(0);
        self.per_interval.iter().map(|(&i, &c)| (i * interval_ns, c)).collect()
    }
}

/// The counters of a capture read by several sources (the sockets of a PACKET_FANOUT group, or
/// one), added up.
#[derive(Debug, Clone, Default)]
pub struct CaptureCounters {
    /// Per interval (start in ns), every interface and source.
    pub per_interval: Vec<(u64, Counters)>,
    /// Per interface, every source.
    pub per_interface: Vec<(String, Counters)>,
    /// Per source, the packets its sockets were offered (the fanout's split).
    pub per_source_received: Vec<u64>,
}

impl CaptureCounters {
    pub fn of(sources: &[LiveSource]) -> CaptureCounters {
        let mut per_interval: std::collections::BTreeMap<u64, Counters> = Default::default();
        for (start, c) in sources.iter().flat_map(LiveSource::interval_counters) {
            per_interval.entry(start).or_default().add(c);
        }
        let mut per_interface = sources.first().map(LiveSource::counters).unwrap_or_default();
        for source in sources.iter().skip(1) {
            for (mine, (_, theirs)) in per_interface.iter_mut().zip(source.counters()) {
                mine.1.add(theirs);
            }
        }
        let per_source_received =
            sources.iter().map(|s| s.counters().iter().map(|(_, c)| c.received_pkts).sum()).collect();
        CaptureCounters { per_interval: per_interval.into_iter().collect(), per_interface, per_source_received }
    }

    /// Every interface and source added up.
    pub fn total(&self) -> Counters {
        let mut all = Counters::default();
        for (_, c) in &self.per_interface {
            all.add(*c);
        }
        all
    }
}

impl LiveSource {
    /// Reads the counters at packet time `at_ns`.
    fn update_counters(&mut self, at_ns: u64) {
        let mut change = Counters::default();
        for ((port, c), counted) in self.ports.iter_mut().zip(&mut self.counters).zip(&mut self.interval_counted) {
            let now = port.update_counters();
            // A loopback count may step back (a leaving copy counted before it was seen): the
            // intervals count each packet once, at the highest the count reached.
            change.add(now.since(*counted));
            *counted = counted.max(now);
            *c = now;
        }
        if let Some(interval_ns) = self.interval_ns {
            if change != Counters::default() {
                self.per_interval.entry(at_ns / interval_ns).or_default().add(change);
            }
        }
    }

    /// Raises a tick at `now_ns` if one is due by the wall clock `wall`.
    fn tick_due(&mut self, wall: u64, now_ns: u64) -> bool {
        if wall < self.next_tick_wall_ns {
            return false;
        }
        self.next_tick_wall_ns = wall.saturating_add(self.tick_ns);
        let now_ns = now_ns.max(self.last_frame_ns);
        self.update_counters(now_ns);
        self.pending_tick = Some(now_ns);
        self.clock_ns = now_ns;
        true
    }

    /// Whether reading should end now: the stop flag rose, and the drain is over (nothing
    /// left to read, `idle`, after `DRAIN_NS`; or `MAX_DRAIN_NS` passed).
    fn stopping(&mut self, wall: u64, idle: bool) -> bool {
        if !self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let since = wall.saturating_sub(*self.stop_at_wall_ns.get_or_insert(wall));
        since >= MAX_DRAIN_NS || (idle && since >= DRAIN_NS)
    }

    #[cold]
    fn end(&mut self) {
        self.ended = true;
        self.pending_tick = None;
        self.update_counters(self.clock_ns.max(self.last_frame_ns));
        for (port, c) in self.ports.iter().zip(&mut self.counters) {
            c.unread_pkts += port.unread();
        }
    }

    /// Waits until a port may have a frame or the next tick or stop is due.
    fn wait(&mut self, wall: u64) -> Result<(), CaptureError> {
        let until = self.stop_at_wall_ns.map_or(self.next_tick_wall_ns, |s| (s + DRAIN_NS).min(self.next_tick_wall_ns));
        let timeout_ns = until.saturating_sub(wall).clamp(1_000_000, 1_000_000_000);
        let timeout =
            Timespec { tv_sec: (timeout_ns / 1_000_000_000) as i64, tv_nsec: (timeout_ns % 1_000_000_000) as i64 };
        // Built per wait (a few interfaces; waits come at most once per ring block or tick, not
        // per frame): each borrows its port's descriptor.
        let mut fds: Vec<PollFd<'_>> =
            self.ports.iter().map(|p| PollFd::from_borrowed_fd(p.fd(), PollFlags::IN)).collect();
        if let Err(e) = poll(&mut fds, Some(&timeout)) {
            // A signal (the stop, most likely) interrupts the wait: look again.
            return if e == rustix::io::Errno::INTR { Ok(()) } else { Err(ring::capture_error("poll", e.into())) };
        }
        let failed = fds.iter().position(|p| p.revents().intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL));
        if let Some(i) = failed {
            let e = match &self.ports[i] {
                Port::Ring(r) => r.take_error(),
                Port::Pcap(_) => io::Error::other("capture handle failed"),
            };
            return Err(ring::capture_error(&self.names[i], e));
        }
        Ok(())
    }
}

impl PacketSource for LiveSource {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.ended {
            return Ok(None);
        }
        loop {
            // The oldest frame ready on any interface.
            let mut best: Option<(usize, u64)> = None;
            for (i, port) in self.ports.iter_mut().enumerate() {
                if let Some(ts) = port.ready()? {
                    if best.is_none_or(|(_, b)| ts < b) {
                        best = Some((i, ts));
                    }
                }
            }
            if let Some((i, ts)) = best {
                if self.frames.is_multiple_of(CLOCK_EVERY) {
                    let wall = wall_ns();
                    if self.stopping(wall, false) {
                        self.end();
                        return Ok(None);
                    }
                    if self.tick_due(wall, self.last_frame_ns) {
                        return Ok(None); // the frame stays ready for the next call
                    }
                }
                let Some(frame) = self.ports[i].take() else {
                    // The ring's header put the frame outside its block: the block goes back
                    // unread. Pause at the time already reached, then read on.
                    self.clock_ns = self.clock_ns.max(self.last_frame_ns);
                    self.pending_tick = Some(self.clock_ns);
                    return Ok(None);
                };
                self.frames += 1;
                self.last_frame_ns = self.last_frame_ns.max(ts);
                self.bytes += frame.data.len() as u64;
                return Ok(Some(frame));
            }
            let wall = wall_ns();
            if self.stopping(wall, true) {
                self.end();
                return Ok(None);
            }
            if self.tick_due(wall, wall.saturating_sub(TICK_LAG_NS)) {
                return Ok(None);
            }
            self.wait(wall)?;
        }
    }

    fn tick(&mut self) -> Option<u64> {
        self.pending_tick.take()
    }

    /// Bytes captured so far.
    fn position(&self) -> u64 {
        self.bytes
    }

    fn size_hint(&self) -> Option<u64> {
        None
    }

    fn format(&self) -> &str {
        self.format
    }
}

/// The wall clock in ns since the Unix epoch (the clock kernel timestamps use).
fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

static STOP: AtomicBool = AtomicBool::new(false);
/// The signals that stop a run, by name, in the order [`stopped_by`] looks at them.
const STOP_SIGNALS: [(i32, &str); 3] = [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM"), (SIGHUP, "SIGHUP")];
/// Per stop signal: it came once already (the next one takes the default action).
static STOP_SEEN: [AtomicBool; 3] = [AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false)];
/// Per stop signal: its handlers are installed (once: a second set would end the process at
/// the first signal).
static STOP_INSTALLED: Mutex<[bool; 3]> = Mutex::new([false; 3]);

/// Installs the stop handlers of the signals `which` (indexes into [`STOP_SIGNALS`]).
fn stop_on(which: &[usize]) -> io::Result<&'static AtomicBool> {
    let mut installed = STOP_INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    for &i in which {
        if !installed[i] {
            let (signal, seen) = (STOP_SIGNALS[i].0, &STOP_SEEN[i]);
            // In this order: the default action only if the signal came before.
            signal_hook::flag::register_conditional_default(signal, seen)?;
            signal_hook::flag::register(signal, seen)?;
            signal_hook::flag::register(signal, &STOP)?;
            installed[i] = true;
        }
    }
    Ok(&STOP)
}

/// A flag raised by the first SIGINT or SIGTERM, for [`LiveSource::open`]. A second one of
/// the same signal ends the process at once, by its default action (as SA_RESETHAND would).
pub fn stop_on_signals() -> io::Result<&'static AtomicBool> {
    stop_on(&[0, 1])
}

/// [`stop_on_signals`], SIGHUP included: for a run that has nothing to reload (`analyze`), a
/// hang-up ends it like SIGTERM, outputs written, rather than killing it with nothing written.
pub fn stop_on_signals_and_hangup() -> io::Result<&'static AtomicBool> {
    stop_on(&[0, 1, 2])
}

/// The first stop signal that came (`"SIGINT"`, `"SIGTERM"`, `"SIGHUP"`), if any.
pub fn stopped_by() -> Option<&'static str> {
    STOP_SIGNALS.iter().zip(&STOP_SEEN).find(|(_, seen)| seen.load(Ordering::SeqCst)).map(|((_, name), _)| *name)
}

static RELOAD: AtomicBool = AtomicBool::new(false);

/// A flag raised by every SIGHUP (the monitor takes it down when it has reloaded).
pub fn reload_on_sighup() -> io::Result<&'static AtomicBool> {
    signal_hook::flag::register(SIGHUP, &RELOAD)?;
    Ok(&RELOAD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn raised_soon(flag: &AtomicBool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while !flag.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        flag.load(Ordering::SeqCst)
    }

    #[test]
    fn the_first_stop_signal_raises_the_flag_and_sighup_the_reload_flag() {
        let stop = stop_on_signals().unwrap();
        // Installing twice changes nothing (the first signal must not end the process).
        assert!(std::ptr::eq(stop, stop_on_signals().unwrap()));
        let reload = reload_on_sighup().unwrap();
        let me = rustix::process::getpid();
        rustix::process::kill_process(me, rustix::process::Signal::HUP).unwrap();
        assert!(raised_soon(reload));
        assert!(!stop.load(Ordering::SeqCst));
        assert_eq!(stopped_by(), None);
        rustix::process::kill_process(me, rustix::process::Signal::TERM).unwrap();
        assert!(raised_soon(stop));
        assert_eq!(stopped_by(), Some("SIGTERM"));
    }
}
