//! Tstat's view of a TCP connection (`FlowConfig::tstat`, `--layout tstat`): each direction's
//! counters, RTT samples, windows, in-flight estimate and out-of-sequence classes as Tstat 3.3
//! computes them, followed packet by packet, and where Tstat ends the connection.
//!
//! The rules are read from Tstat's source (itself tcptrace's, extended): `tcp.c`
//! (`tcp_flow_stat`: the per-packet path, the FIN, RST and half-duplex closes, windows, in-flight
//! bytes, PSH-delimited messages), `rexmit.c` (the per-direction list of segments by quarter of
//! the sequence space, at most 100 a quarter; `ack_in`/`rtt_ackin`'s RTT samples, Karn's rule
//! included; `real_rules_test`'s classes of out-of-sequence segments). They are restated here in
//! sonde's terms, including Tstat's arithmetic where it shows in the numbers: 32-bit sequence
//! numbers compared without regard to wrapping, an MSS kept in a C `short`, counters of one byte
//! (SYN, FIN, RST). Times are whole microseconds, as libpcap hands them to Tstat.
//!
//! Not followed: Tstat's lazy idle collector (sonde's idle timeout applies). Tstat's source also
//! drops an IPv4 packet repeating the previous one's IP id, length and TCP checksum within 2 ms
//! (`dup_tcp_check`), but Tstat 3.3's logs count such copies (1kxun.pcap 192.168.115.8:49612,
//! every client packet twice, 45 µs apart: 9 client packets, 3 network duplicates), so they are
//! counted here too.

use sonde_wire::{IpSummary, TcpFlags, TcpSummary};

/// Tstat's `MAX_SEG_PER_QUAD`: segments a quarter of the sequence space keeps (the oldest go).
pub const MAX_SEG_PER_QUAD: usize = 100;
/// `RTO_MIN`, `RTT_MIN`, `INITIAL_RTO`, `INITIAL_RTT_MIN` (µs).
const RTO_MIN: f64 = 100_000.0;
const RTT_MIN: f64 = 1_000.0;
const INITIAL_RTO: f64 = 500_000.0;
const INITIAL_RTT_MIN: f64 = 5_000.0;

/// Tstat's segment classes (`tstat.h`).
mod class {
    pub const IN_SEQUENCE: u8 = 0;
    pub const RETRANSMISSION_RTO: u8 = 1;
    pub const RETRANSMISSION_FR: u8 = 2;
    pub const REORDERING: u8 = 3;
    pub const NETWORK_DUPLICATE: u8 = 4;
    pub const FLOW_CONTROL: u8 = 5;
    pub const UNNECESSARY_RETRANSMISSION_RTO: u8 = 6;
    pub const UNNECESSARY_RETRANSMISSION_FR: u8 = 7;
    pub const DUPLICATE_RC_LESS_THAN_RTT: u8 = 8;
    pub const DUPLICATE_RC_LESS_THAN_RTO: u8 = 9;
    pub const OOO_RC_LESS_THAN_RTT: u8 = 10;
    pub const OOO_RC_LESS_THAN_RTO: u8 = 11;
    pub const UNNECESSARY_RC_LESS_THAN_RTT: u8 = 12;
    pub const UNNECESSARY_RC_LESS_THAN_RTO: u8 = 13;
    pub const UNKNOWN: u8 = 63;
    pub const BATCH: u8 = 16;
    pub const NO_RTT_SAMPLE: u8 = 32;
}

/// One direction as Tstat prints it (its `tcb`), plus the state its rules read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TstatDir {
    pub packets: u64,
    pub reset_count: u8,
    pub ack_pkts: u64,
    pub pureack_pkts: u64,
    pub unique_bytes: u64,
    pub data_pkts: u64,
    pub data_bytes: u64,
    pub rexmit_pkts: u32,
    pub rexmit_bytes: u32,
    pub out_order_pkts: u32,
    pub syn_count: u8,
    pub fin_count: u8,
    /// Packet times (ns; 0: none) of the first and last segments with payload, and of the first
    /// ACK without SYN.
    pub payload_start_ns: u64,
    pub payload_end_ns: u64,
    pub ack_start_ns: u64,
    /// RTT samples (µs): sum, sum of squares, count, min, max.
    pub rtt_sum: f64,
    pub rtt_sum2: f64,
    pub rtt_count: u32,
    pub rtt_min: u64,
    pub rtt_max: u64,
    pub ttl_min: u32,
    pub ttl_max: u32,
    pub f1323_ws: bool,
    pub f1323_ts: bool,
    pub window_scale: u8,
    pub fsack_req: bool,
    pub sacks_sent: u32,
    /// The last MSS option, as Tstat's `short` (65495 is -41).
    pub mss: i16,
    pub max_seg_size: u32,
    pub min_seg_size: u32,
    pub win_max: u32,
    pub win_min: u32,
    pub win_zero_ct: u32,
    pub cwin_max: u64,
    pub cwin_min: u64,
    pub initialwin_bytes: u32,
    pub rtx_rto: u32,
    pub rtx_fr: u32,
    pub reordering: u32,
    pub net_dup: u32,
    pub unknown: u32,
    pub flow_control: u32,
    pub unnecessary_rtx_rto: u32,
    pub unnecessary_rtx_fr: u32,
    /// A SYN or FIN repeated with another sequence number.
    pub bad_behavior: bool,
    /// PSH- (or FIN-) delimited messages.
    pub msg_count: u32,
    // The state the rules read.
    fin_seqno: u32,
    closed: bool,
    syn: u32,
    fin: u32,
    ack: u32,
    seq: u32,
    win_curr: u32,
    data_acked: bool,
    msg_last_seq: u32,
}

/// How Tstat ended a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TstatEnd {
    /// Both FINs acknowledged: complete.
    Complete,
    /// A RST: complete when both SYNs were seen.
    Reset,
    /// The client sent data without SYN before any SYN/ACK: not complete.
    HalfDuplex,
}

/// Tstat's record of a TCP connection.
#[derive(Debug, Clone, PartialEq)]
pub struct TstatTcp {
    /// Tstat opened it: its first packet was a client SYN without ACK. Otherwise Tstat never
    /// tracked the packets (no line in its logs) and the rest is empty.
    pub opened: bool,
    /// Where Tstat ended it (None: still open when sonde's flow ended).
    pub end: Option<TstatEnd>,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Client, server.
    pub dirs: [TstatDir; 2],
}

impl TstatTcp {
    /// Tstat's `complete` flag for its logs given how sonde's flow ended otherwise (`eof`: the
    /// input ended with the flow open, which Tstat logs as not complete).
    pub fn complete(&self, eof: bool) -> bool {
        let both_syns = self.dirs[0].syn_count > 0 && self.dirs[1].syn_count > 0;
        match self.end {
            Some(TstatEnd::Complete) => true,
            Some(TstatEnd::Reset | TstatEnd::HalfDuplex) => both_syns,
            None => !eof && both_syns,
        }
    }
}

/// What the tracker must do with a packet after Tstat's view of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TstatVerdict {
    /// Counted (or ignored: a connection Tstat does not track, a duplicate).
    Continue,
    /// Tstat ends the connection with this packet (counted).
    EndsAfter(TstatEnd),
    /// Tstat ends the connection at this packet, which belongs to no connection of Tstat's: end
    /// the flow and let the packet start another.
    EndsBefore,
}

#[derive(Debug, Clone, Copy, Default)]
struct Seg {
    first: u32,
    last: u32,
    /// Sent at (µs).
    time: u64,
    acked: u32,
    retrans: u8,
    ip_id: u16,
    class: u8,
}

#[derive(Debug, Clone, Default)]
struct Quad {
    segs: Vec<Seg>,
    prev: Option<u8>,
    next: Option<u8>,
}

/// One direction's segments, by quarter of the 32-bit sequence space (tcptrace's quadrants: the
/// one opposite the current is dropped).
#[derive(Debug, Clone, Default)]
struct SeqSpace {
    quads: [Option<Quad>; 4],
}

fn quad_index(seq: u32) -> usize {
    (seq >> 30) as usize
}

impl SeqSpace {
    /// The quarter of `seq`, with its neighbours made and linked (`whichquad`).
    fn which(&mut self, seq: u32) -> usize {
        let q = quad_index(seq);
        if self.quads[q].as_ref().is_some_and(|x| x.next.is_some() && x.prev.is_some()) {
            return q;
        }
        let (next, opposite, prev) = ((q + 1) % 4, (q + 2) % 4, (q + 3) % 4);
        for i in [q, next, prev] {
            self.quads[i].get_or_insert_with(Quad::default);
        }
        self.quads[opposite] = None;
        let set = |s: &mut Self, i: usize, p: Option<usize>, n: Option<usize>| {
            if let Some(quad) = s.quads[i].as_mut() {
                if let Some(p) = p {
                    quad.prev = Some(p as u8);
                }
                if let Some(n) = n {
                    quad.next = Some(n as u8);
                }
            }
        };
        set(self, q, Some(prev), Some(next));
        set(self, next, Some(q), None);
        set(self, prev, None, Some(q));
        if let Some(x) = self.quads[next].as_mut() {
            x.next = None;
        }
        if let Some(x) = self.quads[prev].as_mut() {
            x.prev = None;
        }
        q
    }

    fn segs(&mut self, q: usize) -> &mut Vec<Seg> {
        &mut self.quads[q].get_or_insert_with(Quad::default).segs
    }
}

/// Merges neighbouring acknowledged segments (`collapse_quad`).
fn collapse(segs: &mut Vec<Seg>) {
    let mut i = 0;
    while i + 1 < segs.len() {
        if segs[i].acked == 0 {
            break;
        }
        let next = segs[i + 1];
        if next.acked != 0 && segs[i].last.wrapping_add(1) == next.first {
            let s = &mut segs[i];
            s.last = next.last;
            s.acked = next.acked;
            if next.time > s.time {
                s.time = next.time;
                s.ip_id = next.ip_id;
                s.class = next.class;
            }
            segs.remove(i + 1);
        } else {
            i += 1;
        }
    }
}

/// Tstat's `Average`: over `n + 0.0001`.
fn average(sum: f64, n: u32) -> f64 {
    sum / (f64::from(n) + 0.0001)
}

/// Tstat's `Stdev`: 0 up to two samples (NaN when rounding makes the variance negative, as C's
/// `sqrt` does).
fn stdev(sum: f64, sum2: f64, n: u32) -> f64 {
    if n <= 2 {
        return 0.0;
    }
    let n = f64::from(n);
    ((sum2 - sum * sum / n) / (n - 1.0)).sqrt()
}

fn pair(dirs: &mut [TstatDir; 2], dir: usize) -> (&mut TstatDir, &mut TstatDir) {
    let [a, b] = dirs;
    if dir == 0 {
        (a, b)
    } else {
        (b, a)
    }
}

/// A TCP flow's Tstat state.
#[derive(Debug, Clone, Default)]
pub(crate) struct TstatConn {
    opened: bool,
    /// Its first packet was not a client SYN: Tstat drops every packet (until a SYN opens a new
    /// connection).
    trash: bool,
    end: Option<TstatEnd>,
    first_ns: u64,
    last_ns: u64,
    dirs: [TstatDir; 2],
    spaces: [SeqSpace; 2],
}

/// The segment a classification is about: the new one inserted before `next` (not seen), or
/// the one seen again at `at`.
struct Classify {
    at: usize,
    len: u64,
    ip_id: u16,
    seen: bool,
    recovery: f64,
}

impl TstatConn {
    /// Tstat ended it at a client's data before any SYN/ACK.
    pub(crate) fn half_duplex(&self) -> bool {
        self.end == Some(TstatEnd::HalfDuplex)
    }

    pub(crate) fn record(&self) -> TstatTcp {
        TstatTcp { opened: self.opened, end: self.end, first_ns: self.first_ns, last_ns: self.last_ns, dirs: self.dirs }
    }

    /// Tstat's handling of one packet sent by `dir` (0: sonde's client).
    pub(crate) fn on_packet(&mut self, dir: usize, ts_ns: u64, ip: &IpSummary, t: &TcpSummary) -> TstatVerdict {
        let flags = t.flags;
        let opens = flags.syn() && !flags.ack();
        if !self.opened {
            if self.trash || !opens || dir != 0 {
                if self.trash && opens {
                    return TstatVerdict::EndsBefore;
                }
                self.trash = true;
                return TstatVerdict::Continue;
            }
            self.opened = true;
            self.first_ns = ts_ns;
        }
        if self.end.is_some() {
            // Tstat no longer has it (the tracker ends the flow at the verdict).
            return if opens { TstatVerdict::EndsBefore } else { TstatVerdict::Continue };
        }
        let now = ts_ns / 1_000;
        self.last_ns = ts_ns;
        // Tstat reads the IPv4 id's place in the header: in IPv6 that is the payload length.
        let ip_id = if ip.src.is_ipv4() { ip.ident as u16 } else { ip.total_len.wrapping_sub(40) as u16 };
        let (this, other) = pair(&mut self.dirs, dir);
        let payload = t.payload_len;
        if flags.syn() {
            this.syn_count = this.syn_count.wrapping_add(1);
        }
        if flags.rst() {
            this.reset_count = this.reset_count.wrapping_add(1);
        }
        if flags.fin() {
            this.fin_count = this.fin_count.wrapping_add(1);
            this.fin_seqno = t.seq.wrapping_add(payload);
        }
        if dir == 0 && !flags.syn() && other.syn_count == 0 && payload != 0 {
            self.end = Some(TstatEnd::HalfDuplex);
            return TstatVerdict::EndsBefore;
        }
        if flags.ack() && other.fin_count >= 1 && t.ack >= other.fin_seqno.wrapping_add(1) {
            other.closed = true;
        }
        let mut eff_win = 0u64;
        if flags.ack() || flags.syn() {
            eff_win = u64::from(t.window);
            if this.f1323_ws && other.f1323_ws {
                eff_win = eff_win.wrapping_shl(u32::from(this.window_scale));
            }
        }
        let start = u64::from(t.seq);
        let end = start + u64::from(payload);
        if flags.syn() {
            if this.syn_count > 1 && this.syn != t.seq {
                this.bad_behavior = true;
            }
            this.syn = t.seq;
            other.ack = t.seq;
        }
        if flags.fin() {
            let fin = end as u32;
            if this.fin_count > 1 && this.fin != fin {
                this.bad_behavior = true;
            }
            this.fin = fin;
        }
        let o = &t.options;
        if let Some(mss) = o.mss {
            this.mss = mss as i16;
        }
        if let Some(ws) = o.window_scale {
            this.window_scale = ws;
            this.f1323_ws = true;
        }
        if o.timestamp.is_some() {
            this.f1323_ts = true;
        }
        if !flags.syn() && (!this.f1323_ws || !other.f1323_ws) {
            this.window_scale = 0;
            other.window_scale = 0;
        }
        if o.sack_permitted {
            this.fsack_req = true;
        }
        if o.sack_count > 0 {
            this.sacks_sent += 1;
        }
        if payload > 0 {
            this.data_pkts += 1;
            this.data_bytes += u64::from(payload);
            this.max_seg_size = this.max_seg_size.max(payload);
            if this.min_seg_size == 0 || payload < this.min_seg_size {
                this.min_seg_size = payload;
            }
        }
        let ttl = u32::from(ip.ttl);
        if this.ttl_min == 0 || this.ttl_min > ttl {
            this.ttl_min = ttl;
        }
        this.ttl_max = this.ttl_max.max(ttl);
        this.packets += 1;

        let mut out_order = false;
        let mut retrans_num = 0i32;
        let mut retrans_actual = 0i32;
        if flags.syn() || flags.fin() || payload > 0 {
            let mut len = payload as i32 + i32::from(flags.syn()) + i32::from(flags.fin());
            retrans_num = self.rexmit(dir, t.seq, len as u64, &mut out_order, ip_id, now);
            retrans_actual = retrans_num;
            let this = &mut self.dirs[dir];
            if flags.syn() {
                len -= 1;
                if this.syn_count > 1 && retrans_actual > 0 {
                    retrans_actual -= 1;
                }
            }
            if flags.fin() {
                len -= 1;
                if this.fin_count > 1 && retrans_actual > 0 {
                    retrans_actual -= 1;
                }
            }
            if retrans_actual < len {
                this.unique_bytes += (len - retrans_actual) as u64;
            }
        }
        if out_order {
            self.dirs[dir].out_order_pkts += 1;
        }
        if flags.ack() {
            self.ack_in(1 - dir, t.ack, now);
        }
        let (this, other) = pair(&mut self.dirs, dir);
        let is_retrans = retrans_num > 0;
        if is_retrans {
            this.rexmit_pkts += 1;
            this.rexmit_bytes = this.rexmit_bytes.wrapping_add(retrans_actual as u32);
        } else {
            this.seq = end as u32;
        }
        if flags.rst() {
            if flags.ack() {
                this.ack_pkts += 1;
            }
            if u32::from(this.reset_count) + u32::from(other.reset_count) != 0 {
                self.end = Some(TstatEnd::Reset);
                return TstatVerdict::EndsAfter(TstatEnd::Reset);
            }
            return TstatVerdict::Continue;
        }
        if flags.ack() || flags.syn() {
            this.win_curr = eff_win as u32;
            if eff_win > u64::from(this.win_max) {
                this.win_max = eff_win as u32;
            }
            if eff_win > 0 && (this.win_min == 0 || eff_win < u64::from(this.win_min)) {
                this.win_min = eff_win as u32;
            }
        }
        if flags.ack() {
            if eff_win == 0 {
                this.win_zero_ct += 1;
            }
            this.ack_pkts += 1;
            if payload == 0 && !flags.syn() && !flags.fin() {
                this.pureack_pkts += 1;
            }
            this.ack = t.ack;
        }
        if !other.data_acked && flags.ack() && other.syn.wrapping_add(1) != t.ack {
            other.data_acked = true;
        }
        if payload > 0 && !this.data_acked && !is_retrans {
            this.initialwin_bytes = this.initialwin_bytes.wrapping_add(payload);
        }
        if flags.ack() && !flags.syn() && this.ack_start_ns == 0 {
            this.ack_start_ns = ts_ns;
        }
        if payload != 0 {
            if this.payload_start_ns == 0 {
                this.payload_start_ns = ts_ns;
            }
            this.payload_end_ns = ts_ns;
        }
        if !flags.syn() && !out_order && !is_retrans {
            let cwin = (end as u32).wrapping_sub(other.ack);
            if (cwin as i32) > 0 {
                let cwin = u64::from(cwin);
                this.cwin_max = this.cwin_max.max(cwin);
                if this.cwin_min == 0 || cwin < this.cwin_min {
                    this.cwin_min = cwin;
                }
            }
        }
        if flags.ack() && (flags.0 & TcpFlags::PSH != 0 || flags.fin()) && this.msg_last_seq < this.seq {
            let size = if this.msg_last_seq == 0 {
                this.seq.wrapping_sub(this.syn).wrapping_sub(1)
            } else {
                this.seq.wrapping_sub(this.msg_last_seq)
            };
            if size > 0 {
                this.msg_count += 1;
            }
            this.msg_last_seq = this.seq;
        }
        if self.dirs[0].closed && self.dirs[1].closed {
            self.end = Some(TstatEnd::Complete);
            return TstatVerdict::EndsAfter(TstatEnd::Complete);
        }
        TstatVerdict::Continue
    }

    /// Places a segment (`len` sequence numbers from `seq`, SYN and FIN included) in `dir`'s
    /// list; returns how many of them were sent before (`rexmit`).
    fn rexmit(&mut self, dir: usize, seq: u32, len: u64, out_order: &mut bool, ip_id: u16, now: u64) -> i32 {
        let seq_last = seq.wrapping_add(len as u32).wrapping_sub(1);
        let q = self.spaces[dir].which(seq);
        if quad_index(seq) != quad_index(seq_last) {
            // Across two quarters: tcptrace's LAST_SEQ, (QUADSIZE - 1) * quadnum, is its own.
            let last_of_quad = 0x3FFF_FFFFu32.wrapping_mul(quad_index(seq) as u32 + 1);
            let len1 = u64::from(last_of_quad.wrapping_sub(seq).wrapping_add(1));
            let next = self.spaces[dir].quads[q].as_ref().and_then(|x| x.next).map_or(q, usize::from);
            let first2 = (quad_index(seq_last) as u32) << 30;
            let rex = self.addseg(dir, q, seq, len1, out_order, ip_id, now);
            rex.wrapping_add(self.addseg(dir, next, first2, len.wrapping_sub(len1), out_order, ip_id, now))
        } else {
            self.addseg(dir, q, seq, len, out_order, ip_id, now)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn addseg(
        &mut self,
        dir: usize,
        q: usize,
        mut first: u32,
        mut len: u64,
        out_order: &mut bool,
        ip_id: u16,
        now: u64,
    ) -> i32 {
        let last = first.wrapping_add(len as u32).wrapping_sub(1);
        let mut rexlen = 0i32;
        let mut split = false;
        let mut recovery = 0.0f64;
        let new_seg = |first: u32, len: u64| Seg {
            first,
            last: first.wrapping_add(len as u32).wrapping_sub(1),
            time: now,
            ip_id,
            ..Seg::default()
        };
        let mut i = {
            let segs = self.spaces[dir].segs(q);
            if segs.last().is_some_and(|tail| first > tail.last) {
                segs.len()
            } else {
                0
            }
        };
        while i < self.spaces[dir].segs(q).len() {
            let s = self.spaces[dir].segs(q)[i];
            if first > s.last {
                i += 1;
                continue;
            }
            if first < s.first {
                if last < s.last {
                    *out_order = true;
                }
                self.spaces[dir].segs(q).insert(i, new_seg(first, len));
                i += 1;
                if last <= s.first {
                    self.rules_test(dir, q, Classify { at: i, len, ip_id, seen: false, recovery }, now);
                    return rexlen;
                }
                let segs = self.spaces[dir].segs(q);
                segs[i - 1].last = s.first.wrapping_sub(1);
                let part = u64::from(segs[i - 1].last.wrapping_sub(segs[i - 1].first));
                self.rules_test(dir, q, Classify { at: i, len: part, ip_id, seen: false, recovery }, now);
                first = s.first;
                len = u64::from(last.wrapping_sub(first).wrapping_add(1));
            }
            let s = &mut self.spaces[dir].segs(q)[i];
            if first >= s.first {
                s.retrans = s.retrans.wrapping_add(1);
                recovery = now as f64 - s.time as f64;
                if !split {
                    s.time = now;
                }
                if last <= s.last {
                    rexlen = rexlen.wrapping_add(len as i32);
                    self.rules_test(dir, q, Classify { at: i, len, ip_id, seen: true, recovery }, now);
                    return rexlen;
                }
                split = true;
                rexlen = rexlen.wrapping_add(s.last.wrapping_sub(first).wrapping_add(1) as i32);
                first = s.last.wrapping_add(1);
                let part = rexlen as i64 as u64;
                self.rules_test(dir, q, Classify { at: i, len: part, ip_id, seen: true, recovery }, now);
                len = u64::from(last.wrapping_sub(first).wrapping_add(1));
            }
            i += 1;
        }
        let segs = self.spaces[dir].segs(q);
        segs.push(new_seg(first, len));
        if segs.len() > MAX_SEG_PER_QUAD {
            let head = segs.remove(0);
            segs[0].first = head.first;
        }
        rexlen
    }

    /// Classifies a segment out of sequence and counts it (`rules_test`, `real_rules_test`).
    fn rules_test(&mut self, dir: usize, q: usize, c: Classify, now: u64) {
        let (this, other) = pair(&mut self.dirs, dir);
        let Some(quad) = self.spaces[dir].quads[q].as_mut() else { return };
        let segs = &mut quad.segs;
        let p = c.at;
        let Some(seg) = segs.get(p).copied() else { return };
        let mean = average(this.rtt_sum, this.rtt_count) + average(other.rtt_sum, other.rtt_count);
        let mut rto = mean
            + 4.0
                * stdev(
                    this.rtt_sum + other.rtt_sum,
                    this.rtt_sum2 + other.rtt_sum2,
                    this.rtt_count.wrapping_add(other.rtt_count),
                );
        let mut rtt = this.rtt_min.wrapping_add(other.rtt_min) as f64;
        let valid = this.rtt_count != 0 && other.rtt_count != 0;
        if rto < RTO_MIN {
            rto = RTO_MIN;
        }
        if rtt < RTT_MIN {
            rtt = RTT_MIN;
        }
        // The segment before: the one seen again's neighbour, or the new one's (two back).
        let before = if c.seen { p.checked_sub(1) } else { p.checked_sub(2) };
        let mut recovery = c.recovery;
        if !c.seen {
            recovery = before.map_or(-1.0, |b| now as f64 - segs[b].time as f64);
        }
        let prev_tos = if p == 0 { class::IN_SEQUENCE } else { before.map_or(class::IN_SEQUENCE, |b| segs[b].class) };
        if !valid {
            rtt = INITIAL_RTT_MIN;
            rto = INITIAL_RTO;
            if recovery == -1.0 {
                recovery = now as f64 - seg.time as f64;
            }
        }
        let rule1a = seg.ip_id != c.ip_id;
        let rule1b = recovery > rto;
        let rule1d = recovery < mean;
        let rule2b = before.is_some_and(|b| segs[b].acked > 3 && recovery < rto);
        let rule2c = (now as f64 - seg.time as f64) < rtt;
        let probing = c.len == 1 && other.win_curr == 0 && this.syn_count != 0 && other.syn_count != 0;
        let cl = |x: u8| if valid { x } else { x | class::NO_RTT_SAMPLE };
        use class::*;
        // A segment sent again (still unacknowledged, or acknowledged already): Tstat's cascade,
        // with the classes of its case.
        let again = |fr: u8, rto: u8, less_rtt: u8, less_rto: u8| {
            cl(if !rule1a {
                NETWORK_DUPLICATE
            } else if rule1b || rule2b {
                if rule2b {
                    fr
                } else {
                    rto
                }
            } else if rule1d {
                less_rtt
            } else if !rule1b {
                less_rto
            } else {
                UNKNOWN
            })
        };
        let kind = if probing {
            FLOW_CONTROL
        } else if rule1d && prev_tos != IN_SEQUENCE {
            prev_tos | BATCH
        } else if seg.acked == 0 {
            if c.seen {
                again(RETRANSMISSION_FR, RETRANSMISSION_RTO, DUPLICATE_RC_LESS_THAN_RTT, DUPLICATE_RC_LESS_THAN_RTO)
            } else if rule1b || rule2b {
                cl(if rule2b { RETRANSMISSION_FR } else { RETRANSMISSION_RTO })
            } else if rule2c {
                cl(REORDERING)
            } else if rule1d {
                cl(OOO_RC_LESS_THAN_RTT)
            } else if !rule1b {
                cl(OOO_RC_LESS_THAN_RTO)
            } else {
                cl(UNKNOWN)
            }
        } else {
            again(
                UNNECESSARY_RETRANSMISSION_FR,
                UNNECESSARY_RETRANSMISSION_RTO,
                UNNECESSARY_RC_LESS_THAN_RTT,
                UNNECESSARY_RC_LESS_THAN_RTO,
            )
        };
        let target = if c.seen { p } else { p - 1 };
        segs[target].class = kind;
        match kind & (BATCH - 1) {
            IN_SEQUENCE => {}
            RETRANSMISSION_RTO => this.rtx_rto += 1,
            RETRANSMISSION_FR => this.rtx_fr += 1,
            REORDERING => this.reordering += 1,
            NETWORK_DUPLICATE => this.net_dup += 1,
            FLOW_CONTROL => this.flow_control += 1,
            UNNECESSARY_RETRANSMISSION_FR => this.unnecessary_rtx_fr += 1,
            UNNECESSARY_RETRANSMISSION_RTO => this.unnecessary_rtx_rto += 1,
            _ => this.unknown += 1,
        }
    }

    /// An ACK for `dir`'s data (`ack_in`): marks the segments it covers, and times the one it
    /// acknowledges exactly unless that was sent again (Karn) or a segment before it was sent
    /// later (`rtt_ackin`).
    fn ack_in(&mut self, dir: usize, ack: u32, now: u64) {
        let space = &mut self.spaces[dir];
        let q = space.which(ack);
        let d = &mut self.dirs[dir];
        let mut last_xmit = 0u64;
        if let Some(qp) = space.quads[q].as_ref().and_then(|x| x.prev).map(usize::from) {
            let segs = space.segs(qp);
            let mut changed = false;
            for s in segs.iter_mut().filter(|s| s.acked == 0) {
                s.acked = 1;
                changed = true;
                last_xmit = last_xmit.max(s.time);
            }
            if changed {
                collapse(segs);
            }
        }
        let segs = space.segs(q);
        let mut changed = false;
        for s in segs.iter_mut() {
            if ack <= s.first {
                break;
            }
            last_xmit = last_xmit.max(s.time);
            s.acked = s.acked.wrapping_add(1);
            if s.acked > 1 {
                continue;
            }
            changed = true;
            if ack == s.last.wrapping_add(1) {
                let intervening = last_xmit > s.time;
                if !intervening && s.retrans == 0 {
                    let sample = now.saturating_sub(s.time);
                    if d.rtt_min == 0 || d.rtt_min > sample {
                        d.rtt_min = sample;
                    }
                    d.rtt_max = d.rtt_max.max(sample);
                    let x = sample as f64;
                    d.rtt_sum += x;
                    d.rtt_sum2 += x * x;
                    d.rtt_count += 1;
                }
            }
        }
        if changed {
            collapse(segs);
        }
    }
}

/// Each TCP flow's Tstat state, by the flow's slot in the tracker's TCP slab.
#[derive(Debug, Default)]
pub(crate) struct TstatStates(Vec<TstatConn>);

impl TstatStates {
    pub(crate) fn of(&mut self, conn: u32) -> &mut TstatConn {
        let i = conn as usize;
        if self.0.len() <= i {
            self.0.resize_with(i + 1, TstatConn::default);
        }
        &mut self.0[i]
    }

    pub(crate) fn record(&self, conn: u32) -> Option<Box<TstatTcp>> {
        self.0.get(conn as usize).map(|c| Box::new(c.record()))
    }

    pub(crate) fn release(&mut self, conn: u32) {
        if let Some(c) = self.0.get_mut(conn as usize) {
            *c = TstatConn::default();
        }
    }

    pub(crate) fn untouched_bytes(&self) -> usize {
        (self.0.capacity() - self.0.len()) * std::mem::size_of::<TstatConn>()
    }
}
