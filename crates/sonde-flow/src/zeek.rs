//! Zeek's connection vocabulary (its conn.log's `conn_state` and `history`): each TCP end's
//! state as Zeek's TCP analyzer keeps it, and the history letters by Zeek's rules, followed
//! packet by packet (`FlowConfig::history`; docs/zeek.md). The rules are read from Zeek's
//! source (`TCPSessionAdapter.cc`, `TCP_Endpoint.cc`, `conn/main.zeek`'s `conn_state`).
//!
//! Letters are written the way sonde orients the flow: upper case for the client (`c_`),
//! lower case for the server, `^` first when the client did not send the first packet. sonde
//! orients flows as Zeek does (`FlowConfig::orient_by_port`: a first packet without SYN from a
//! likely server port comes from the server), except a SYN/ACK seen first, whose sender sonde
//! puts on the server side from the start where Zeek waits for its answer: such a flow's
//! history starts with `^h` whether or not Zeek would have flipped it.

use sonde_wire::{TcpFlags, TcpSummary};

/// Letters a history keeps; later ones are not written (Zeek keeps all: repeated letters are
/// rare and grow by powers of ten, so real histories stay under a dozen).
pub const HISTORY_MAX: usize = 23;

/// A connection's history: Zeek's letters, oldest first.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct History {
    len: u8,
    letters: [u8; HISTORY_MAX],
}

impl History {
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.letters[..usize::from(self.len)]).expect("history letters are ASCII")
    }

    fn push(&mut self, letter: u8) {
        if let Some(slot) = self.letters.get_mut(usize::from(self.len)) {
            *slot = letter;
            self.len += 1;
        }
    }

    /// Upper case for lower and the reverse: the same history seen from the other end.
    fn mirrored(mut self) -> History {
        for l in &mut self.letters[..usize::from(self.len)] {
            *l = if l.is_ascii_uppercase() { l.to_ascii_lowercase() } else { l.to_ascii_uppercase() };
        }
        self
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for History {
    /// A history spelled out (tests, a mirrored history's rest); letters past [`HISTORY_MAX`]
    /// are dropped.
    fn from(s: &str) -> History {
        let mut h = History::default();
        s.bytes().for_each(|b| h.push(b));
        h
    }
}

/// Zeek's summary of a connection's states (conn.log's `conn_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// A SYN seen, no reply.
    S0,
    /// Established, not terminated.
    S1,
    /// Normal establishment and termination.
    SF,
    /// A SYN answered by a RST.
    Rej,
    /// Established, the originator tried to close, no reply from the responder.
    S2,
    /// Established, the responder tried to close, no reply from the originator.
    S3,
    /// Established, the originator aborted (RST).
    Rsto,
    /// Established, the responder aborted.
    Rstr,
    /// The originator sent a SYN then a RST; no SYN/ACK from the responder.
    Rstos0,
    /// The responder sent a SYN/ACK then a RST; no SYN from the originator.
    Rstrh,
    /// The originator sent a SYN then a FIN; no SYN/ACK from the responder.
    Sh,
    /// The responder sent a SYN/ACK then a FIN; no SYN from the originator.
    Shr,
    /// No SYN seen, just midstream traffic.
    Oth,
}

impl ConnState {
    pub fn name(self) -> &'static str {
        match self {
            ConnState::S0 => "S0",
            ConnState::S1 => "S1",
            ConnState::SF => "SF",
            ConnState::Rej => "REJ",
            ConnState::S2 => "S2",
            ConnState::S3 => "S3",
            ConnState::Rsto => "RSTO",
            ConnState::Rstr => "RSTR",
            ConnState::Rstos0 => "RSTOS0",
            ConnState::Rstrh => "RSTRH",
            ConnState::Sh => "SH",
            ConnState::Shr => "SHR",
            ConnState::Oth => "OTH",
        }
    }

    /// A UDP flow's state: which ends sent.
    pub fn udp(client_sent: bool, server_sent: bool) -> ConnState {
        match (client_sent, server_sent) {
            (true, true) => ConnState::SF,
            (true, false) => ConnState::S0,
            (false, true) => ConnState::Shr,
            (false, false) => ConnState::Oth,
        }
    }
}

/// What a TCP flow's record says in Zeek's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeekConn {
    pub state: ConnState,
    pub history: History,
}

/// A UDP flow's history (Zeek's UDP letters): `D` once the client sent, `d` once the server
/// did, in that order; `^` first when the server sent first (a flow oriented by its ports).
/// `None` for an end that sent nothing, else its first packet's time.
pub fn udp_history(client_first_ns: Option<u64>, server_first_ns: Option<u64>) -> &'static str {
    match (client_first_ns, server_first_ns) {
        (Some(c), Some(s)) if s < c => "^dD",
        (Some(_), Some(_)) => "Dd",
        (Some(_), None) => "D",
        (None, Some(_)) => "^d",
        (None, None) => "",
    }
}

/// Zeek's `likely_server_ports` as its base scripts fill them (the ports its protocol analyzers
/// register as servers'), TCP then UDP, sorted.
const LIKELY_TCP: &[u16] = &[
    21, 22, 25, 53, 79, 80, 81, 88, 135, 139, 143, 389, 443, 445, 465, 502, 514, 563, 585, 587, 614, 631, 636, 989,
    990, 992, 993, 995, 1080, 1434, 1883, 2811, 3128, 3268, 3306, 3389, 5222, 5223, 5269, 5432, 6379, 6666, 6667, 6668,
    6669, 8000, 8080, 8888, 20000,
];
const LIKELY_UDP: &[u16] = &[
    53, 67, 88, 123, 137, 161, 162, 389, 443, 514, 1812, 2123, 2152, 3389, 3544, 4011, 4754, 4789, 5060, 5072, 5353,
    5355, 6081, 20000,
];

/// Whether Zeek takes `port` as a likely server's.
pub fn likely_server_port(tcp: bool, port: u16) -> bool {
    if tcp { LIKELY_TCP } else { LIKELY_UDP }.binary_search(&port).is_ok()
}

/// Zeek's orientation of a flow whose first packet (from `src` to `dst`) has no SYN, or is a
/// SYN/ACK (`syn` tells; always false for UDP): whether the sender is the server. A sender on a
/// likely server port is, unless the receiver's port is one too: then only a packet without SYN
/// from the lower port (the more plausible server) is.
pub fn sender_is_server(tcp: bool, syn: bool, src: u16, dst: u16) -> bool {
    likely_server_port(tcp, src) && (!likely_server_port(tcp, dst) || (tcp && !syn && src < dst))
}

/// Zeek's `TOO_LARGE_SEQ_DELTA`: a SYN or RST this far from the last sequence number is not
/// trusted to move it.
const TOO_LARGE_SEQ_DELTA: i32 = 1_048_576;

/// A TCP end's state (Zeek's `EndpointState`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Inactive,
    SynSent,
    SynAckSent,
    Partial,
    Established,
    Closed,
    Reset,
}

/// Zeek's `HIST_*` bits: a letter of the once-only kind (and the first of the repeatable ones)
/// is written when its bit is first set. The responder's are these shifted by 16.
const SYN_PKT: u32 = 0x1;
const FIN_PKT: u32 = 0x2;
const RST_PKT: u32 = 0x4;
const FIN_RST_PKT: u32 = 0x8;
const DATA_PKT: u32 = 0x10;
const ACK_PKT: u32 = 0x20;
const MULTI_FLAG_PKT: u32 = 0x40;

/// One end as Zeek's `TCP_Endpoint` keeps it (sequence numbers in 32 bits: Zeek's 64-bit
/// relative ones differ only past 4 GiB, where equality is what is asked).
#[derive(Clone, Copy, Debug, Default)]
struct End {
    state: State,
    prev: State,
    sent_fin: bool,
    /// Zeek's `did_close`: this end's close (FIN or RST) was reported.
    did_close: bool,
    start: u32,
    last: u32,
    /// How far the peer acknowledged this end's sequence space.
    ack: u32,
    /// The relative sequence numbers of the last SYN, FIN (its end) and RST: a repeat with
    /// another one writes its letter again.
    last_syn: u32,
    last_fin: u32,
    last_rst: u32,
    /// Retransmissions and zero windows, whose letters are written at 1, 10, 100, … of them.
    rxmits: u32,
    zero_windows: u32,
}

impl End {
    fn set_state(&mut self, state: State) {
        if state != self.state {
            self.prev = self.state;
            self.state = state;
        }
    }

    fn init_seqs(&mut self, start: u32, last: u32) {
        self.start = start;
        self.ack = start;
        self.last = last;
    }

    /// Zeek's `TCP_Endpoint::Size()` is 0: no byte of sequence space besides SYN and FIN.
    fn sent_nothing(&self, peer: &End) -> bool {
        let no_data_acked = matches!(self.ack.wrapping_sub(self.start), 0 | 1);
        if self.prev == State::SynSent && self.state == State::Reset && peer.state == State::Inactive && !no_data_acked
        {
            return true;
        }
        let size = (self.last.wrapping_sub(self.start) as i32).max(self.ack.wrapping_sub(self.start) as i32);
        let size = if size != 0 { size.wrapping_sub(1) } else { size };
        let size = if self.sent_fin && size != 0 { size.wrapping_sub(1) } else { size };
        size == 0
    }
}

/// Each TCP flow's Zeek state, by the flow's slot in the tracker's TCP slab (beside the flow's
/// own state rather than in it: only a run that shows the columns has them).
#[derive(Debug, Default)]
pub(crate) struct ZeekStates(Vec<ZeekTcp>);

impl ZeekStates {
    /// Room reserved for `flows` flows (address space until written).
    pub(crate) fn with_capacity(flows: usize) -> Self {
        ZeekStates(Vec::with_capacity(flows))
    }

    pub(crate) fn untouched_bytes(&self) -> usize {
        (self.0.capacity() - self.0.len()) * std::mem::size_of::<ZeekTcp>()
    }

    /// The state of the flow in slot `conn`.
    pub(crate) fn of(&mut self, conn: u32) -> &mut ZeekTcp {
        let i = conn as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, ZeekTcp::default());
        }
        &mut self.0[i]
    }

    /// The flow in slot `conn` in Zeek's words.
    pub(crate) fn conn(&self, conn: u32) -> Option<ZeekConn> {
        self.0.get(conn as usize).map(ZeekTcp::conn)
    }

    /// Clears slot `conn` for its next flow.
    pub(crate) fn release(&mut self, conn: u32) {
        if let Some(z) = self.0.get_mut(conn as usize) {
            *z = ZeekTcp::default();
        }
    }
}

/// A TCP flow's Zeek state.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ZeekTcp {
    ends: [End; 2],
    history: History,
    /// `HIST_*` bits: Zeek's originator's in the low half, the responder's in the high half.
    seen: u32,
    /// The direction (0 = sonde's client) Zeek takes as originator: the first packet's sender
    /// until a SYN/ACK seen first is answered.
    orig: u8,
    begun: bool,
    /// Zeek's pending timer (packet time, ns; 0: none): the attempt timer of an originator's
    /// SYN, or (`removal`) the removal of a connection whose close was complete. One at a time:
    /// a complete close cancels the attempt timer, and Zeek adds no timer after that.
    timer_ns: u64,
    removal: bool,
}

/// Zeek's `tcp_attempt_delay` and `tcp_close_delay`.
const ATTEMPT_DELAY_NS: u64 = 5_000_000_000;
const CLOSE_DELAY_NS: u64 = 5_000_000_000;

impl ZeekTcp {
    /// Whether Zeek's timers would have removed the connection by `ts_ns` (before a packet of
    /// that time): its close was complete 5 s ago, or its originator's SYN is 5 s old and the
    /// responder has sent nothing (`AttemptTimer`). A timer that fired without removing it is
    /// gone.
    pub(crate) fn expired(&mut self, ts_ns: u64) -> bool {
        if self.timer_ns == 0 || ts_ns < self.timer_ns {
            return false;
        }
        if self.removal {
            return true;
        }
        self.timer_ns = 0;
        let (o, r) = (&self.ends[usize::from(self.orig)], &self.ends[1 - usize::from(self.orig)]);
        matches!(o.state, State::SynSent | State::SynAckSent) && r.state == State::Inactive
    }

    /// One packet sent by `dir` (0 = client): Zeek's `TCPSessionAdapter::Process` as far as the
    /// states and the history go.
    pub(crate) fn on_packet(&mut self, dir: usize, ts_ns: u64, t: &TcpSummary) {
        let flags = t.flags;
        if self.begun
            && flags.0 & (TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST) == 0
            && self.ends[dir].state != State::Inactive
        {
            return self.on_plain(dir, t);
        }
        if !self.begun {
            // Zeek's originator is the first packet's sender, unless its port says server
            // (`TCPAnalyzer::WantConnection`): then the flow is flipped from its start.
            self.begun = true;
            let flipped = (!flags.syn() || flags.ack()) && sender_is_server(true, flags.syn(), t.src_port, t.dst_port);
            self.orig = if flipped { 1 - dir as u8 } else { dir as u8 };
            if flipped {
                self.history.push(b'^');
            }
        }
        let len = t.payload_len;
        // Zeek's `get_segment_len`: a RST's data is not in the stream.
        let seg_len = if flags.rst() { 0 } else { len } + u32::from(flags.syn()) + u32::from(flags.fin());
        let seq_end = t.seq.wrapping_add(seg_len);
        self.init_end(dir, flags, t.seq, seq_end);
        let rel_seq = t.seq.wrapping_sub(self.ends[dir].start);
        let is_orig = dir == usize::from(self.orig);
        self.update_history(dir, flags, rel_seq, len);
        self.update_window(dir, t.window, flags);
        self.acknowledge(1 - dir, t);
        self.update_last_seq(dir, seq_end, flags, len);
        if self.update_state(dir, is_orig, flags, t, ts_ns) {
            self.closed(dir, ts_ns);
        }
    }

    /// Zeek's `ConnectionClosed`: the first close of an end; when the connection's close is
    /// complete (this end reset, the peer closed before, or never sent), its timers are
    /// cancelled and it goes 5 s after this packet.
    fn closed(&mut self, dir: usize, ts_ns: u64) {
        if self.ends[dir].did_close {
            return;
        }
        self.ends[dir].did_close = true;
        let peer = &self.ends[1 - dir];
        if !self.removal && (self.ends[dir].state == State::Reset || peer.did_close || peer.state == State::Inactive) {
            self.timer_ns = ts_ns.saturating_add(CLOSE_DELAY_NS);
            self.removal = true;
        }
    }

    /// `on_packet` for the packets most flows are made of: an ACK or data, without SYN, FIN or
    /// RST, from an end already seen. Such a packet changes no state (`UpdateStateMachine` acts
    /// on flags, or on an end's first packet), has no sequence number to remember, and writes
    /// a letter only the first time (`check`, skipped once its bit is set: the history is then
    /// past a lone `H`).
    fn on_plain(&mut self, dir: usize, t: &TcpSummary) {
        let len = t.payload_len;
        let bit = if len > 0 {
            DATA_PKT
        } else if t.flags.ack() {
            ACK_PKT
        } else {
            0
        };
        if bit != 0 && self.seen & self.mask(dir, bit) == 0 {
            self.check(dir, bit, if bit == DATA_PKT { b'D' } else { b'A' });
        }
        if t.window == 0 {
            self.update_window(dir, 0, t.flags);
        }
        self.acknowledge(1 - dir, t);
        self.update_last_seq(dir, t.seq.wrapping_add(len), t.flags, len);
    }

    /// What `t`'s ACK tells of `peer`'s sequence space (a RST's is not trusted).
    fn acknowledge(&mut self, peer: usize, t: &TcpSummary) {
        if !t.flags.ack() {
            return;
        }
        let p = &mut self.ends[peer];
        if p.state == State::Inactive {
            // Zeek's `init_peer`: the peer's numbering starts as if its SYN had been seen.
            let base = t.ack.wrapping_sub(1);
            p.init_seqs(base, base);
        } else if !t.flags.rst() {
            let delta = t.ack.wrapping_sub(p.ack) as i32;
            if !(t.ack == 0 && delta > TOO_LARGE_SEQ_DELTA) && delta > 0 {
                p.ack = t.ack;
            }
        }
    }

    /// Zeek's `init_endpoint`.
    fn init_end(&mut self, dir: usize, flags: TcpFlags, seq: u32, seq_end: u32) {
        let e = &mut self.ends[dir];
        match e.state {
            State::Inactive if flags.syn() => e.init_seqs(seq, seq_end),
            // A partial connection: numbered as though a SYN had been seen, this packet not a
            // duplicate.
            State::Inactive => e.init_seqs(seq.wrapping_sub(1), seq),
            State::SynSent | State::SynAckSent if flags.syn() && seq != e.start => e.init_seqs(seq, seq_end),
            State::Established | State::Partial if flags.syn() => e.init_seqs(seq, seq_end),
            State::Reset if flags.syn() && e.prev == State::Inactive => e.init_seqs(seq, seq_end),
            _ => {}
        }
    }

    /// `bit` of `dir`'s side in `seen` (the responder's in the high half).
    fn mask(&self, dir: usize, bit: u32) -> u32 {
        if dir == usize::from(self.orig) {
            bit
        } else {
            bit << 16
        }
    }

    /// Writes `letter` (upper case: Zeek's originator's) once `bit` is first seen; returns
    /// whether it had been seen before.
    fn check(&mut self, dir: usize, bit: u32, letter: u8) -> bool {
        if matches!(letter, b'A' | b'D') && self.history.len == 1 && self.history.letters[0] == b'H' {
            // Zeek's flip: a connection that began with a SYN/ACK whose next packet is
            // productive (an ACK or data) had its SYN missed. Its history becomes `^h`.
            self.history = History::from("^h");
            self.orig = 1 - self.orig;
        }
        let mask = self.mask(dir, bit);
        if self.seen & mask != 0 {
            return true;
        }
        self.seen |= mask;
        self.add(dir, letter);
        false
    }

    /// A SYN's, FIN's or RST's letter: written the first time (`check`), and again when its
    /// sequence number `at` differs from the last of its kind (`last`, which it becomes).
    fn repeatable(&mut self, dir: usize, bit: u32, letter: u8, at: u32, last: fn(&mut End) -> &mut u32) {
        let seen = self.check(dir, bit, letter);
        let last = last(&mut self.ends[dir]);
        let again = seen && at != *last;
        *last = at;
        if again {
            self.add(dir, letter);
        }
    }

    fn add(&mut self, dir: usize, letter: u8) {
        let resp = dir != usize::from(self.orig);
        self.history.push(if resp { letter.to_ascii_lowercase() } else { letter });
    }

    /// A letter written at the 1st, 10th, 100th, … event of its kind.
    fn scaled(&mut self, dir: usize, count: u32, letter: u8) {
        let mut n = count;
        while n.is_multiple_of(10) && n > 1 {
            n /= 10;
        }
        if n == 1 {
            self.add(dir, letter);
        }
    }

    /// Zeek's `update_history`.
    fn update_history(&mut self, dir: usize, flags: TcpFlags, rel_seq: u32, len: u32) {
        let bits = u8::from(flags.syn()) + u8::from(flags.fin()) + u8::from(flags.rst());
        if bits > 1 {
            if flags.fin() && flags.rst() {
                self.check(dir, FIN_RST_PKT, b'I');
            } else {
                self.check(dir, MULTI_FLAG_PKT, b'Q');
            }
        } else if bits == 1 {
            if flags.syn() {
                let letter = if flags.ack() { b'H' } else { b'S' };
                self.repeatable(dir, SYN_PKT, letter, rel_seq, |e| &mut e.last_syn);
            }
            if flags.fin() {
                // A FIN's sequence number is at the end of its data.
                self.repeatable(dir, FIN_PKT, b'F', rel_seq.wrapping_add(len), |e| &mut e.last_fin);
            }
            if flags.rst() {
                self.repeatable(dir, RST_PKT, b'R', rel_seq, |e| &mut e.last_rst);
            }
        } else if len > 0 {
            self.check(dir, DATA_PKT, b'D');
        } else if flags.ack() {
            self.check(dir, ACK_PKT, b'A');
        }
    }

    /// Zeek's `update_window` as far as the history goes: a zero window is interesting unless
    /// it comes with or after a RST, or after the peer's FIN.
    fn update_window(&mut self, dir: usize, window: u16, flags: TcpFlags) {
        let (e, peer) = (self.ends[dir], self.ends[1 - dir]);
        if window == 0 && !flags.rst() && peer.state != State::Closed && e.state != State::Reset {
            let n = e.zero_windows.saturating_add(1);
            self.ends[dir].zero_windows = n;
            self.scaled(dir, n, b'W');
        }
    }

    /// Zeek's `update_last_seq`: moves the end's last sequence number, or counts a
    /// retransmission.
    fn update_last_seq(&mut self, dir: usize, seq_end: u32, flags: TcpFlags, len: u32) {
        let e = &mut self.ends[dir];
        let delta = seq_end.wrapping_sub(e.last) as i32;
        if (flags.syn() || flags.rst()) && !(-TOO_LARGE_SEQ_DELTA..=TOO_LARGE_SEQ_DELTA).contains(&delta) {
        } else if flags.fin() && e.last == e.start.wrapping_add(1) {
            // Connections past 2 GiB seen only at their SYN and FIN.
            e.last = seq_end;
        } else if e.state == State::Reset {
        } else if delta > 0 {
            e.last = seq_end;
        } else if len > 0 {
            let n = e.rxmits.saturating_add(1);
            e.rxmits = n;
            self.scaled(dir, n, b'T');
        }
    }

    /// Zeek's `UpdateStateMachine`. `is_orig` is whether the sender was Zeek's originator when
    /// the packet arrived (before a flip it caused). Returns whether the packet closed its end
    /// (Zeek's `do_close`).
    fn update_state(&mut self, dir: usize, is_orig: bool, flags: TcpFlags, t: &TcpSummary, ts_ns: u64) -> bool {
        let peer = 1 - dir;
        if flags.fin() {
            self.ends[dir].sent_fin = true;
        }
        match self.ends[dir].state {
            State::Inactive => self.inactive(dir, is_orig, flags, t, ts_ns),
            State::SynSent | State::SynAckSent => {
                if flags.fin() {
                    self.ends[dir].set_state(State::Closed);
                }
                if flags.rst() {
                    self.ends[dir].set_state(State::Reset);
                }
                flags.fin() || flags.rst()
            }
            State::Established | State::Partial => {
                if flags.syn()
                    && !flags.ack()
                    && self.ends[dir].state == State::Partial
                    && self.ends[peer].state == State::Inactive
                {
                    self.ends[dir].set_state(State::SynSent);
                }
                if flags.fin() && !flags.rst() {
                    self.ends[dir].set_state(State::Closed);
                    let p = &mut self.ends[peer];
                    if p.state == State::Reset && p.prev == State::Closed {
                        // The peer's FIN then RST: a normal close after all.
                        p.set_state(State::Closed);
                    }
                }
                if flags.rst() {
                    self.ends[dir].set_state(State::Reset);
                }
                flags.fin() || flags.rst()
            }
            State::Closed => {
                let reset = flags.rst() && self.ends[peer].state != State::Closed;
                if reset {
                    self.ends[dir].set_state(State::Reset);
                }
                reset
            }
            State::Reset => false,
        }
    }

    /// Zeek's `UpdateInactiveState`: an end's first packet. Returns whether it closed the end.
    fn inactive(&mut self, dir: usize, is_orig: bool, flags: TcpFlags, t: &TcpSummary, ts_ns: u64) -> bool {
        let peer = 1 - dir;
        if flags.syn() {
            if is_orig {
                self.ends[dir].set_state(if flags.ack() { State::SynAckSent } else { State::SynSent });
                if !self.removal {
                    self.timer_ns = ts_ns.saturating_add(ATTEMPT_DELAY_NS);
                }
            } else {
                if !flags.ack() && self.ends[peer].state == State::SynAckSent && t.seq == self.ends[dir].start {
                    // A SYN/SYN-ACK reversal: Zeek flips the connection.
                    self.orig = dir as u8;
                    self.history.push(b'^');
                    self.ends[peer].set_state(State::Established);
                }
                if self.ends[peer].state == State::SynSent {
                    self.ends[peer].set_state(State::Established);
                }
                self.ends[dir].set_state(State::Established);
            }
        }
        if flags.fin() {
            self.ends[dir].set_state(State::Closed);
        }
        if flags.rst() {
            self.ends[dir].set_state(State::Reset);
        }
        if self.ends[dir].state == State::Inactive {
            // No control flag changed the state.
            let orig_state = self.ends[usize::from(self.orig)].state;
            if !is_orig && t.payload_len == 0 && orig_state == State::SynSent {
                // An ACK of the SYN before the SYN/ACK: not a partial connection.
            } else if flags.ack() && self.ends[peer].state == State::Established {
                // A SYN/ACK and now its ACK: the SYN was missed.
                self.ends[dir].set_state(State::Established);
            } else {
                self.ends[dir].set_state(State::Partial);
            }
        }
        flags.fin() || flags.rst()
    }

    /// The flow's state and history, from sonde's client's side (see the module's doc).
    pub(crate) fn conn(&self) -> ZeekConn {
        let history = if self.orig == 1 {
            // Zeek's originator is sonde's server (a SYN/ACK seen first and never answered):
            // the history seen from the other end, its leading `^` (the originator did not
            // send the first packet) the other way too.
            let mirrored = self.history.mirrored();
            match mirrored.as_str().strip_prefix('^') {
                Some(rest) => History::from(rest),
                None => {
                    let mut h = History::from("^");
                    mirrored.as_str().bytes().for_each(|b| h.push(b));
                    h
                }
            }
        } else {
            self.history
        };
        ZeekConn { state: conn_state(&self.ends[0], &self.ends[1], &history), history }
    }
}

/// Zeek's `conn_state()` for TCP, from the originator's end `o` and the responder's `r`.
fn conn_state(o: &End, r: &End, history: &History) -> ConnState {
    let inactive = |e: &End| matches!(e.state, State::Inactive | State::Partial);
    match (o.state, r.state) {
        (State::SynSent | State::SynAckSent, State::Reset) => ConnState::Rej,
        (State::Reset, State::Reset) if o.sent_nothing(r) && r.sent_nothing(o) => ConnState::Rej,
        (_, State::Reset) if inactive(o) => ConnState::Rstrh,
        (_, State::Reset) => ConnState::Rstr,
        (State::Reset, _) if inactive(r) => {
            if rst_after_syn_only(history) {
                ConnState::Rstos0
            } else {
                ConnState::Oth
            }
        }
        (State::Reset, _) => ConnState::Rsto,
        (State::Closed, State::Closed) => ConnState::SF,
        (State::Closed, _) if inactive(r) => ConnState::Sh,
        (State::Closed, _) => ConnState::S2,
        (_, State::Closed) if inactive(o) => ConnState::Shr,
        (_, State::Closed) => ConnState::S3,
        (State::SynSent, State::Inactive) => ConnState::S0,
        (State::Established, State::Established) => ConnState::S1,
        _ => ConnState::Oth,
    }
}

/// Zeek's pattern `^?S[^HAFGIQ]*R.*`: a SYN, then a RST before any answer or data.
fn rst_after_syn_only(history: &History) -> bool {
    let h = history.as_str().strip_prefix('^').unwrap_or(history.as_str());
    let Some(rest) = h.strip_prefix('S') else { return false };
    rest.bytes().take_while(|b| !b"HAFGIQ".contains(b)).any(|b| b == b'R')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_letters_fall_at_powers_of_ten() {
        let mut z = ZeekTcp { begun: true, ..ZeekTcp::default() };
        for n in 1..=1000 {
            z.scaled(0, n, b'T');
        }
        assert_eq!(z.history.as_str(), "TTTT");
    }

    #[test]
    fn the_pattern_of_rstos0() {
        // Zeek's pattern is case-sensitive: the responder's letters do not stop it.
        for (h, want) in [("SR", true), ("^SaR", true), ("ShR", true), ("SAR", false), ("R", false), ("SHR", false)] {
            assert_eq!(rst_after_syn_only(&History::from(h)), want, "{h}");
        }
    }

    #[test]
    fn a_history_keeps_its_first_letters() {
        let long = "S".repeat(HISTORY_MAX + 5);
        assert_eq!(History::from(long.as_str()).as_str().len(), HISTORY_MAX);
    }
}
