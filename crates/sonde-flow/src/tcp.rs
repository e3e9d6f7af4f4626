//! TCP connection analysis: per-direction counters, sequence tracking (unique bytes,
//! retransmissions, reordering), data→ACK RTT with Karn's rule, handshake RTT, windows,
//! in-flight bytes, and Tstat's classification of out-of-sequence segments.
//!
//! Direction 0 is the client (the SYN sender, else the first sender), 1 the server.

use sonde_wire::{IpSummary, TcpSummary};

use crate::counters::{DirCounters, Pool, Rare, Rtt};
use crate::record::{EndReason, TcpDirStats};
use crate::sent::{Sent, SentList, SentPool};
use crate::seq::{RangePool, SeenRanges, SeqUnwrapper};
use crate::tstat::TstatStates;
use crate::zeek::ZeekStates;

/// RFC 6298 §2.1: the RTO before any RTT sample.
const INITIAL_RTO_NS: u64 = 1_000_000_000;
/// Linux's lower bound on the RTO (TCP_RTO_MIN), which RFC 6298 §2.4 allows.
const MIN_RTO_NS: u64 = 200_000_000;
/// Duplicate ACKs that trigger a fast retransmit (RFC 5681 §3.2).
const DUPACK_THRESHOLD: u8 = 3;
/// Unacknowledged segments kept for RTT matching per direction; beyond this the oldest are
/// dropped (they could only give samples for very large windows).
const MAX_OUTSTANDING: usize = 8192;
// A list holds one more than this for a moment (inserted, then the oldest dropped).
const _: () = assert!(MAX_OUTSTANDING < crate::sent::MAX_LEN);
/// Recent segments remembered to recognise network duplicates: a copy made by the network
/// travels right behind its original.
const RECENT: usize = 2; // `Half::flags`' RECENT_NEXT bit picks the next entry

#[derive(Debug, Clone, Copy, Default)]
struct Recent {
    start: i64,
    /// `end - start` (a segment's sequence length: payload plus SYN/FIN).
    len: u32,
    ip_ident: u32,
    ts_ns: u64,
}

/// The per-tracker storage the TCP analyzer's flows share.
#[derive(Debug, Default)]
pub struct TcpPools {
    pub(crate) sent: SentPool,
    pub(crate) ranges: RangePool,
    pub(crate) rare: Pool<Rare>,
    pub(crate) rtt: Pool<Rtt>,
    /// With `FlowConfig::history`: each flow's Zeek state, by the flow's slot in the TCP slab.
    pub(crate) zeek: Option<ZeekStates>,
    /// With `FlowConfig::tstat`: each flow's Tstat state, by the flow's slot in the TCP slab.
    pub(crate) tstat: Option<TstatStates>,
    /// The RTT samples (data direction, ns) the packet being analysed took.
    pub new_samples: Vec<(usize, u64)>,
}

impl TcpPools {
    /// Pools with room reserved for `flows` flows: two segments in flight, one rare-event block
    /// and one RTT block each (reserved room costs address space until written; busier flows
    /// grow them), with `history` a Zeek state each, and with `tstat` Tstat's states (grown as
    /// flows come).
    pub fn for_flows(flows: usize, history: bool, tstat: bool) -> Self {
        TcpPools {
            sent: SentPool::with_capacity(2 * flows),
            ranges: RangePool::default(),
            rare: Pool::with_capacity(flows),
            rtt: Pool::with_capacity(flows),
            zeek: history.then(|| ZeekStates::with_capacity(flows)),
            tstat: tstat.then(TstatStates::default),
            new_samples: Vec::with_capacity(4),
        }
    }

    /// Reserved bytes never written.
    pub fn untouched_bytes(&self) -> usize {
        self.sent.untouched_bytes()
            + self.rare.untouched_bytes()
            + self.rtt.untouched_bytes()
            + self.zeek.as_ref().map_or(0, ZeekStates::untouched_bytes)
            + self.tstat.as_ref().map_or(0, TstatStates::untouched_bytes)
    }
}

/// The state of one direction: what it sent, and what its peer acknowledged of it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Half {
    pub stats: DirCounters,
    /// Valid when `flags` has `ISN`: the SYN's sequence number.
    isn: u32,
    /// Valid when `flags` has `SEQ`.
    seq: SeqUnwrapper,
    seen: SeenRanges,
    outstanding: SentList,
    recent: [Recent; RECENT],
    /// `ISN`, `SEQ`, `ACKED` (which optional fields are set), `DATA_ACKED`, `FIN_SEEN`,
    /// `RECENT_NEXT`: bits rather than `Option`s and bools, which would double their size.
    flags: u8,
    /// The OR of the header flags (the low byte) of every segment this direction sent: IPFIX's
    /// tcpControlBits. Here rather than in `DirCounters`, which has no byte to spare.
    segment_flags: u8,
    /// The peer's last announced window (what this side may send into) was zero: the only
    /// thing read of it. A byte of its own: it is written at every packet.
    peer_window_zero: bool,
    /// Valid when `flags` has `ACKED`: the highest cumulative ACK the peer sent for this
    /// direction's data (unwrapped).
    acked: i64,
    /// Consecutive duplicate ACKs received from the peer, saturating: only whether there were
    /// `DUPACK_THRESHOLD` (3) is read.
    dupacks: u8,
    /// Packet time when the highest sequence number last advanced.
    advanced_ns: u64,
    /// SYN and FIN sequence numbers counted in `seen` (subtracted from unique bytes): the low
    /// 16 bits (`Rare::control_seqs_high` has the rest: a direction has one SYN and one FIN
    /// unless it starts over).
    control_seqs: u16,
}

const ISN: u8 = 1;
const SEQ: u8 = 2;
const ACKED: u8 = 4;
/// Which entry of `recent` the next segment takes (RECENT is 2).
const RECENT_NEXT: u8 = 8;
/// The peer has acknowledged some payload (ends the initial window).
const DATA_ACKED: u8 = 16;
const FIN_SEEN: u8 = 32;

impl Half {
    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub(crate) fn isn(&self) -> Option<u32> {
        self.has(ISN).then_some(self.isn)
    }

    fn set_isn(&mut self, isn: u32) {
        self.isn = isn;
        self.flags |= ISN;
    }

    fn seq(&self) -> Option<SeqUnwrapper> {
        self.has(SEQ).then_some(self.seq)
    }

    fn set_seq_base(&mut self, base: u32) {
        self.seq = SeqUnwrapper::new(base);
        self.flags |= SEQ;
    }

    fn acked(&self) -> Option<i64> {
        self.has(ACKED).then_some(self.acked)
    }

    fn set_acked(&mut self, ack: i64) {
        self.acked = ack;
        self.flags |= ACKED;
    }

    fn set_peer_window(&mut self, window: u32) {
        self.peer_window_zero = window == 0;
    }
}

impl Half {
    /// Clears the sequence state (not the counters nor the flags seen), returning pooled state.
    fn reset_sequence(&mut self, pools: &mut TcpPools) {
        self.outstanding.clear(&mut pools.sent);
        self.seen.clear(&mut pools.ranges);
        let (stats, segment_flags) = (self.stats, self.segment_flags);
        *self = Half { stats, segment_flags, ..Half::default() };
    }
}

impl Rtt {
    /// RFC 6298 §2.3's RTO from this direction's samples (probe → receiver → probe), before
    /// the lower bound.
    fn rto_estimate_ns(&self) -> u64 {
        (self.srtt_ns + 4.0 * self.rttvar_ns) as u64
    }

    fn add_sample(&mut self, sample_ns: u64) {
        let r = sample_ns as f64;
        if self.stats.count == 0 {
            self.srtt_ns = r;
            self.rttvar_ns = r / 2.0;
        } else {
            // RFC 6298 §2.3 with alpha = 1/8, beta = 1/4.
            self.rttvar_ns = 0.75 * self.rttvar_ns + 0.25 * (self.srtt_ns - r).abs();
            self.srtt_ns = 0.875 * self.srtt_ns + 0.125 * r;
        }
        self.stats.add(sample_ns);
    }
}

/// One TCP connection as seen at the probe.
#[derive(Debug, Clone, Default)]
pub struct TcpConn {
    pub(crate) half: [Half; 2],
    /// The handshake's two legs (SYN → SYN/ACK, SYN/ACK → ACK): the time of the leg's latest
    /// opening packet (the client's SYN, the server's SYN/ACK; 0 before any) until its closing
    /// packet times it, then its duration. Bit `leg` of `legs_timed` tells which.
    legs_ns: [u64; 2],
    legs_timed: u8,
    /// The direction of the flow's first packet, whose first time is the flow's.
    first_dir: u8,
    pub(crate) client_syn: bool,
    pub(crate) server_synack: bool,
    /// Set when both FINs or a RST were seen; the flow lingers for late ACKs.
    pub(crate) closed: Option<EndReason>,
}

/// What the table must do after a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpVerdict {
    Continue,
    /// The packet is a SYN with a new ISN on an open flow: end this flow, start a new one
    /// with the packet.
    Reused,
}

impl TcpConn {
    /// The first packet's time.
    pub(crate) fn first_ns(&self) -> u64 {
        self.half[usize::from(self.first_dir)].stats.first_ns
    }

    fn leg_timed(&self, leg: usize) -> bool {
        self.legs_timed & 1 << leg != 0
    }

    fn leg_ns(&self, leg: usize) -> Option<u64> {
        self.leg_timed(leg).then_some(self.legs_ns[leg])
    }

    pub(crate) fn hs_syn_synack_ns(&self) -> Option<u64> {
        self.leg_ns(0)
    }

    pub(crate) fn hs_synack_ack_ns(&self) -> Option<u64> {
        self.leg_ns(1)
    }

    /// A packet that opens `leg` (its latest one counts until the leg is timed).
    fn open_leg(&mut self, leg: usize, ts_ns: u64) {
        if !self.leg_timed(leg) {
            self.legs_ns[leg] = ts_ns;
        }
    }

    /// A packet that closes `leg`: times it if it was opened and not yet timed.
    fn close_leg(&mut self, leg: usize, ts_ns: u64) {
        if !self.leg_timed(leg) && self.legs_ns[leg] != 0 {
            self.legs_ns[leg] = ts_ns.saturating_sub(self.legs_ns[leg]);
            self.legs_timed |= 1 << leg;
        }
    }

    /// Returns the pooled state and clears the connection for reuse.
    pub(crate) fn release(&mut self, pools: &mut TcpPools) {
        for h in &mut self.half {
            h.reset_sequence(pools);
            pools.rare.release(&mut h.stats.rare);
            pools.rtt.release(&mut h.stats.rtt);
        }
        *self = TcpConn::default();
    }

    /// The latest packet time.
    pub(crate) fn last_ns(&self) -> u64 {
        self.half[0].stats.last_ns.max(self.half[1].stats.last_ns)
    }

    /// Whether `t`, sent by `dir`, must start a new flow rather than join this one.
    pub fn starts_new_flow(&self, dir: usize, t: &TcpSummary) -> bool {
        if !t.flags.syn() || t.flags.ack() || dir != 0 {
            return false;
        }
        let h = &self.half[0];
        match h.isn() {
            Some(isn) if isn != t.seq => self.closed.is_some() || h.stats.data_pkts > 0 || self.server_synack,
            None => self.closed.is_some(),
            _ => false,
        }
    }

    /// The SYN/ACK's view: a first packet that is a SYN/ACK comes from the server.
    pub fn first_sender_is_server(t: &TcpSummary) -> bool {
        t.flags.syn() && t.flags.ack()
    }

    /// Analyses one packet sent by direction `dir` (0 = client).
    /// Analyses one packet sent by `dir`. Each data→ACK RTT sample it takes is also left in
    /// `pools.new_samples`, with the direction of the data it times, for the caller to take.
    pub fn on_packet(&mut self, pools: &mut TcpPools, dir: usize, ts_ns: u64, ip: &IpSummary, t: &TcpSummary) {
        let flags = t.flags;
        let payload = u64::from(t.payload_len);

        self.count(&mut pools.rare, dir, ts_ns, ip, t);
        self.handshake(dir, ts_ns, t);

        // Window scaling applies once both SYNs carried the option (RFC 7323 §2.2), never to
        // the SYN segments themselves.
        let scale = match (self.half[0].stats.win_scale, self.half[1].stats.win_scale) {
            (Some(_), Some(_)) if !flags.syn() => self.half[dir].stats.win_scale.unwrap_or(0).min(14),
            _ => 0,
        };
        let window = u32::from(t.window) << scale;
        {
            let s = &mut self.half[dir].stats;
            if s.pkts == 1 || window < s.win_min {
                s.win_min = window;
            }
            s.win_max = s.win_max.max(window);
            if window == 0 && !flags.rst() {
                pools.rare.get(&mut s.rare).win_zero += 1;
            }
        }
        if !flags.rst() {
            self.half[1 - dir].set_peer_window(window);
        }

        let seg_len = payload + u64::from(flags.syn()) + u64::from(flags.fin());
        if seg_len > 0 && !flags.rst() {
            self.sequence(pools, dir, ts_ns, ip, t, payload);
        }
        if flags.ack() {
            self.acknowledge(pools, dir, ts_ns, t);
        }

        if flags.rst() {
            self.closed.get_or_insert(EndReason::Rst);
        } else if flags.fin() {
            self.half[dir].flags |= FIN_SEEN;
            if self.half[0].has(FIN_SEEN) && self.half[1].has(FIN_SEEN) {
                self.closed.get_or_insert(EndReason::Fin);
            }
        }
    }

    fn count(&mut self, rare: &mut Pool<Rare>, dir: usize, ts_ns: u64, ip: &IpSummary, t: &TcpSummary) {
        let flags = t.flags;
        let half = &mut self.half[dir];
        half.segment_flags |= flags.0 as u8;
        let s = &mut half.stats;
        s.pkts += 1;
        let carry;
        (s.ip_bytes, carry) = s.ip_bytes.overflowing_add(ip.total_len);
        if carry {
            rare.get(&mut s.rare).ip_bytes_high += 1;
        }
        let first_of_dir = s.first_ns == 0;
        if first_of_dir {
            s.first_ns = ts_ns;
            s.ttl_min = ip.ttl;
            s.ttl_max = ip.ttl;
        }
        s.last_ns = s.last_ns.max(ts_ns);
        s.ttl_min = s.ttl_min.min(ip.ttl);
        s.ttl_max = s.ttl_max.max(ip.ttl);
        if flags.syn() || flags.fin() || flags.rst() {
            let counts = [(&mut s.syn_cnt, flags.syn()), (&mut s.fin_cnt, flags.fin()), (&mut s.rst_cnt, flags.rst())];
            for (i, (count, set)) in counts.into_iter().enumerate() {
                let carry;
                (*count, carry) = count.overflowing_add(u8::from(set));
                if carry {
                    rare.get(&mut s.rare).flag_cnt_high[i] += 1;
                }
            }
        }
        if flags.ack() {
            s.ack_pkts += 1;
            // Tstat: the first ACK segment without SYN.
            if s.first_ack_ns == 0 && !flags.syn() {
                s.first_ack_ns = ts_ns;
            }
            if t.payload_len == 0 && !flags.syn() && !flags.fin() && !flags.rst() {
                s.pure_ack_pkts += 1;
            }
        }
        let o = &t.options;
        if flags.syn() {
            if let Some(mss) = o.mss {
                s.mss_opt = mss;
            }
            if o.window_scale.is_some() {
                s.win_scale = o.window_scale;
            }
            s.sack_permitted |= o.sack_permitted;
            s.timestamps |= o.timestamp.is_some();
        }
        if o.sack_count > 0 {
            rare.get(&mut s.rare).sack_blocks += u32::from(o.sack_count);
        }
        if t.payload_len > 0 {
            s.data_pkts += 1;
            let carry;
            (s.payload_bytes, carry) = s.payload_bytes.overflowing_add(t.payload_len);
            if carry {
                rare.get(&mut s.rare).payload_bytes_high += 1;
            }
            if s.first_payload_ns == 0 {
                s.first_payload_ns = ts_ns;
            }
            s.last_payload_ns = s.last_payload_ns.max(ts_ns);
            if s.seg_min == 0 || t.payload_len < s.seg_min {
                s.seg_min = t.payload_len;
            }
            s.seg_max = s.seg_max.max(t.payload_len);
        }
        // The flow's first time is that of the first direction with one (a direction's first time
        // stays 0 while its packets have time 0).
        if first_of_dir && self.half[1 - dir].stats.first_ns == 0 {
            self.first_dir = dir as u8;
        }
    }

    fn handshake(&mut self, dir: usize, ts_ns: u64, t: &TcpSummary) {
        let flags = t.flags;
        if flags.syn() && !flags.ack() && dir == 0 {
            self.client_syn = true;
            self.open_leg(0, ts_ns);
        } else if flags.syn() && flags.ack() && dir == 1 {
            self.server_synack = true;
            self.close_leg(0, ts_ns);
            self.open_leg(1, ts_ns);
        } else if dir == 0 && flags.ack() && !flags.syn() && !self.leg_timed(1) {
            let acks_synack = self.half[1].isn().is_some_and(|isn| t.ack == isn.wrapping_add(1));
            if acks_synack {
                self.close_leg(1, ts_ns);
            }
        }
    }

    /// Places the segment (`payload` bytes, plus its SYN and FIN) in the sender's sequence
    /// space.
    fn sequence(&mut self, pools: &mut TcpPools, dir: usize, ts_ns: u64, ip: &IpSummary, t: &TcpSummary, payload: u64) {
        let flags = t.flags;
        let seg_len = payload + u64::from(flags.syn()) + u64::from(flags.fin());
        let h = &mut self.half[dir];
        if flags.syn() {
            match h.isn() {
                None => h.set_isn(t.seq),
                Some(isn) if isn != t.seq => {
                    // A SYN with a new ISN before the connection got going: start over.
                    h.reset_sequence(pools);
                    // The RTT estimator restarts too; the samples' statistics stay.
                    if h.stats.rtt.is_some() {
                        let rtt = pools.rtt.get(&mut h.stats.rtt);
                        (rtt.srtt_ns, rtt.rttvar_ns) = (0.0, 0.0);
                    }
                    pools.rare.get(&mut h.stats.rare).syn_retx_new_isn += 1;
                    h.set_isn(t.seq);
                }
                _ => {}
            }
        }
        // Sequence numbers count from the first one seen (the ISN when the SYN came first).
        if !h.has(SEQ) {
            h.set_seq_base(t.seq);
        }
        let start = h.seq.unwrap(t.seq);
        let end_ctl = start + seg_len as i64;
        // Payload begins after the SYN's sequence number.
        let data_start = start + i64::from(flags.syn());
        // SYN and FIN each take a sequence number that is not payload: remember those that
        // added to the covered space (a FIN can reuse a number data already covered).
        let syn_fresh = flags.syn() && !h.seen.contains(&pools.ranges, start, start + 1);
        let fin_fresh = flags.fin() && !h.seen.contains(&pools.ranges, end_ctl - 1, end_ctl);
        if syn_fresh || fin_fresh {
            let carry;
            (h.control_seqs, carry) = h.control_seqs.overflowing_add(u16::from(syn_fresh) + u16::from(fin_fresh));
            if carry {
                pools.rare.get(&mut h.stats.rare).control_seqs_high += 1;
            }
        }
        let old_max = h.seen.max_end(&pools.ranges);
        let outcome = h.seen.add(&mut pools.ranges, start, end_ctl, ts_ns);
        if old_max.is_none_or(|m| end_ctl > m) {
            h.advanced_ns = ts_ns;
        }

        let is_retx = outcome.overlap > 0;
        if is_retx {
            let rare = pools.rare.get(&mut h.stats.rare);
            rare.retx_pkts += 1;
            rare.retx_bytes += outcome.overlap.min(payload);
            h.outstanding.mark_retransmitted(&mut pools.sent, start, end_ctl, ts_ns);
        }
        if outcome.fills_hole {
            pools.rare.get(&mut h.stats.rare).ooo_pkts += 1;
        }
        if is_retx || outcome.fills_hole {
            // Only out-of-sequence segments need the path's RTTs.
            let paths = self.path_rtts(&pools.rtt, dir);
            let seg = Segment { ts_ns, ip_ident: ip.ident, start, end: end_ctl };
            classify(&mut self.half[dir], pools, seg, is_retx, outcome.hole_opened_ns, paths);
        }
        let h = &mut self.half[dir];
        let len = u32::try_from(seg_len).unwrap_or(u32::MAX);
        h.recent[usize::from(h.has(RECENT_NEXT))] = Recent { start, len, ip_ident: ip.ident, ts_ns };
        h.flags ^= RECENT_NEXT;

        // Fresh payload waits for its ACK (RTT), in sequence order.
        if payload > 0 && outcome.fresh > 0 && !is_retx {
            debug_assert_eq!(end_ctl - data_start, payload as i64 + i64::from(flags.fin()));
            h.outstanding.insert(&mut pools.sent, Sent::new(data_start, payload, flags.fin(), ts_ns));
            if h.outstanding.len() > MAX_OUTSTANDING {
                h.outstanding.pop_front(&mut pools.sent);
            }
        }

        // In-flight bytes (Tstat's cwnd estimate): highest sequence sent minus the peer's
        // highest ACK, measured on new in-order data.
        if payload > 0 && !is_retx && !outcome.fills_hole {
            let acked = h.acked().unwrap_or(if h.has(ISN) { 1 } else { start });
            let inflight = (h.seen.max_end(&pools.ranges).unwrap_or(end_ctl) - acked).max(0) as u64;
            let initial_window = !h.has(DATA_ACKED);
            let s = &mut h.stats;
            match u32::try_from(inflight) {
                Ok(narrow) if !s.inflight_wide => s.inflight.add(narrow, initial_window),
                _ => {
                    let counts = s.inflight;
                    let wide = &mut pools.rare.get(&mut s.rare).inflight;
                    if !s.inflight_wide {
                        *wide = counts.widen();
                        s.inflight_wide = true;
                    }
                    wide.add(inflight, initial_window);
                }
            }
        }
    }

    /// Processes the ACK field of a packet sent by `dir`, which acknowledges the peer's data.
    fn acknowledge(&mut self, pools: &mut TcpPools, dir: usize, ts_ns: u64, t: &TcpSummary) {
        let sent = &mut pools.sent;
        let pure = t.payload_len == 0 && !t.flags.syn() && !t.flags.fin() && !t.flags.rst();
        let peer = &mut self.half[1 - dir];
        let Some(unwrapper) = peer.seq() else { return };
        let ack = unwrapper.peek(t.ack);
        match peer.acked() {
            Some(prev) if ack < prev => {}
            Some(prev) if ack == prev => {
                if pure {
                    peer.dupacks = peer.dupacks.saturating_add(1);
                }
            }
            _ => {
                peer.set_acked(ack);
                peer.dupacks = 0;
                // The latest transmission among the segments this ACK releases: an ACK that
                // waited for a later (re)transmission below the timed segment does not time it.
                let mut latest_sent_ns = 0;
                while let Some(front) = peer.outstanding.front(sent) {
                    if front.end() > ack {
                        break;
                    }
                    let last_sent_ns = peer.outstanding.front_last_sent_ns(sent).unwrap_or(front.ts_ns);
                    peer.outstanding.pop_front(sent);
                    peer.flags |= DATA_ACKED;
                    // tcptrace/Tstat: only an ACK for exactly this segment times it; Karn's rule
                    // drops segments that were retransmitted.
                    let exact = front.end() == ack || front.end_ctl() == ack;
                    if exact && !front.retransmitted() && front.ts_ns >= latest_sent_ns {
                        let sample_ns = ts_ns.saturating_sub(front.ts_ns);
                        pools.rtt.get(&mut peer.stats.rtt).add_sample(sample_ns);
                        pools.new_samples.push((1 - dir, sample_ns));
                    }
                    latest_sent_ns = latest_sent_ns.max(last_sent_ns);
                }
            }
        }
    }

    /// The two halves of the path as the probe sees them for `dir`'s data: probe → receiver →
    /// probe (this direction's data→ACK samples, else its handshake leg) and probe → sender →
    /// probe (the other direction's samples, else the other handshake leg).
    fn path_rtts(&self, rtt: &Pool<Rtt>, dir: usize) -> PathRtts {
        let legs = [self.hs_syn_synack_ns(), self.hs_synack_ack_ns()];
        // A direction has an `Rtt` block only once it has a sample.
        let min_of = |d: usize| rtt.peek(self.half[d].stats.rtt).map_or(legs[d], |r| Some(r.stats.min_ns));
        PathRtts { to_receiver: min_of(dir), to_sender: min_of(1 - dir) }
    }

    /// Both directions' records (client, server).
    pub(crate) fn stats(&self, pools: &TcpPools) -> [TcpDirStats; 2] {
        self.half.each_ref().map(|h| {
            let rare = pools.rare.read(h.stats.rare);
            let control_seqs = u64::from(rare.control_seqs_high) << 16 | u64::from(h.control_seqs);
            let unique = h.seen.covered(&pools.ranges).saturating_sub(control_seqs);
            h.stats.record(unique, h.segment_flags, &rare, &pools.rtt.read(h.stats.rtt))
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct PathRtts {
    to_receiver: Option<u64>,
    to_sender: Option<u64>,
}

/// Tstat's out-of-sequence classification for a segment that retransmits seen data
/// (`is_retx`) or fills a hole below the highest sequence number. A sender learns of a loss at
/// the earliest one probe→sender→probe time after the probe saw the hole, so anything sooner
/// is reordering or a network duplicate, not a retransmission.
/// The segment being classified: its sequence range (SYN/FIN included) and IP packet.
#[derive(Debug, Clone, Copy)]
struct Segment {
    ts_ns: u64,
    ip_ident: u32,
    start: i64,
    end: i64,
}

fn classify(h: &mut Half, pools: &mut TcpPools, seg: Segment, is_retx: bool, hole_opened_ns: u64, paths: PathRtts) {
    let Segment { ts_ns, ip_ident, start, end } = seg;
    let full_rtt = match (paths.to_receiver, paths.to_sender) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    // The sender's RTO covers the whole path. Before any data→ACK sample the handshake seeds
    // the estimator (RFC 6298 §2.2: SRTT = R, RTTVAR = R/2, so RTO = 3R).
    let rto = match (h.stats.rtt, full_rtt) {
        (None, Some(r)) => r.saturating_mul(3).max(MIN_RTO_NS),
        (None, None) => INITIAL_RTO_NS,
        (rtt, _) => (pools.rtt.read(rtt).rto_estimate_ns() + paths.to_sender.unwrap_or(0)).max(MIN_RTO_NS),
    };
    let rtt_min = paths.to_sender;
    let a = &mut pools.rare.get(&mut h.stats.rare).anomalies;

    // The same IP datagram twice, within a fraction of an RTT: duplicated by the network.
    if is_retx {
        let len = u32::try_from(end - start).unwrap_or(u32::MAX);
        // The latest copy: an older one of the same range is an earlier transmission.
        let copy = h.recent.iter().filter(|r| r.start == start && r.len == len && r.ts_ns != 0).max_by_key(|r| r.ts_ns);
        if let Some(copy) = copy {
            let gap = ts_ns.saturating_sub(copy.ts_ns);
            let same_packet = copy.ip_ident == ip_ident;
            if same_packet && gap < rtt_min.unwrap_or(1_000_000) {
                a.net_dup += 1;
                return;
            }
        }
    }
    // A window probe while the receiver announced a zero window.
    if h.peer_window_zero {
        a.flow_control += 1;
        return;
    }
    let since_sent = if is_retx {
        let mut first_sent = None;
        h.outstanding.for_each_mut(&mut pools.sent, |s| {
            if s.start < end && start < s.end_ctl() {
                first_sent = Some(s.ts_ns);
            }
            first_sent.is_none()
        });
        first_sent.map_or(ts_ns.saturating_sub(h.advanced_ns), |t| ts_ns.saturating_sub(t))
    } else {
        // How long the hole it fills had been open.
        ts_ns.saturating_sub(hole_opened_ns)
    };
    let fast = h.dupacks >= DUPACK_THRESHOLD;
    if is_retx && h.acked().is_some_and(|ack| end <= ack) {
        // Everything in it had already been acknowledged.
        if fast {
            a.unneeded_fast_retx += 1;
        } else {
            a.unneeded_rto += 1;
        }
        return;
    }
    if !is_retx && rtt_min.is_some_and(|r| since_sent < r) {
        a.reordering += 1;
    } else if since_sent >= rto {
        a.rto += 1;
    } else if fast {
        a.fast_retx += 1;
    } else {
        a.unknown += 1;
    }
}
