//! RTP and RTCP (RFC 3550) on a UDP flow: each direction's first SSRC followed as an RTP
//! receiver follows it — packets, payload bytes, losses (A.1, A.3), out-of-sequence and
//! duplicate packets, interarrival jitter (§6.4.1, A.8) — and the RTCP sender and receiver
//! reports of both directions, RTP and RTCP possibly sharing the port (RFC 5761), STUN and DTLS
//! too (RFC 7983: WebRTC's ICE checks and DTLS-SRTP handshake, skipped and counted).
//!
//! Recognition. RTP has no magic number, and this parser is tried after DNS and QUIC on every
//! unknown UDP flow, so the first datagram must be a plausible RTP packet (version 2, the CSRC
//! list and extension fit, a payload type outside RTCP's range), a well-formed RTCP packet
//! (version 2, the first an SR, RR, SDES, BYE or APP whose length fits) or a STUN message (the
//! magic cookie, the length exact), else it is `NotMine` at once, allocating nothing. The flow
//! is claimed after [`CONFIRMATIONS`] confirmations, each a packet continuing one of its
//! direction's first [`PROBE_SSRCS`] SSRCs with a sequence number 1 to [`PROBE_SEQ_STEP`] ahead and a timestamp within
//! [`PROBE_TS_STEP`] units, or an RTCP datagram whose packets were walked to its end (not
//! SRTCP's, encrypted past the first header). Until then nothing is written to [`Facts`] (the
//! statistics are kept aside and handed over at the claim, so they count from the first
//! packet); without confirmation within [`PROBE_DATAGRAMS`] RTP/RTCP datagrams (or
//! [`PROBE_DEMUXED`] STUN, DTLS or SRTCP ones, and in a flow opened by STUN any other that is not
//! RTP) the parser says `Done` and the flow has no RTP facts.
//!
//! Jitter needs the media clock: static payload types have theirs (RFC 3551); a dynamic type's
//! is set by signalling we do not read, so its stream has `clock_hz` 0 and no jitter. Packets of
//! another payload type with another clock (RFC 4733 events) stay out of the jitter, and a
//! transit difference of a second or more is taken as the sender's timestamp discontinuity, not
//! network jitter: the estimate restarts from that packet.
//!
//! Cut datagrams (the flow layer keeps the first 16 bytes after a flow's first packets) are
//! used fully: the fixed header is 12 bytes. Payload bytes are the datagram's wire length less
//! the header (CSRCs, extension) and padding; when the extension's length word was not captured
//! the stream's last full header length stands in, and the padding of a cut packet (its count is
//! the last byte) is counted as payload, as is an SRTP packet's, whose last byte is the
//! authentication tag's (RFC 3711 §3.1) and whose padding count cannot be trusted.
//!
//! Memory: nothing is buffered; per direction a 128-packet duplicate window and the last
//! [`SR_MEMORY`] sender reports (for round trips), in one allocation made at the first accepted
//! datagram.

use crate::{Dir, Facts, Problems, RtpFacts, RtpStream, Segment, Verdict};

/// Confirmations needed before a flow is claimed as RTP/RTCP.
const CONFIRMATIONS: u8 = 2;
/// Datagrams looked at, at most, before giving up on confirming.
const PROBE_DATAGRAMS: u8 = 8;
/// STUN and DTLS datagrams (RFC 7983 multiplexing: ICE checks, the DTLS-SRTP handshake) and
/// SRTCP ones let pass before giving up on confirming.
const PROBE_DEMUXED: u8 = 250;
/// SSRCs per direction followed while probing.
const PROBE_SSRCS: usize = 4;
/// Largest sequence step (1 = the next packet) that confirms a stream while probing.
const PROBE_SEQ_STEP: u16 = 16;
/// Largest timestamp step, in timestamp units, that confirms a stream while probing: 10 s of a
/// 90 kHz video clock.
const PROBE_TS_STEP: u32 = 900_000;
/// RFC 3550 A.1: a jump ahead of more than this is a restart, not a loss.
const MAX_DROPOUT: u16 = 3000;
/// RFC 3550 A.1: a packet this far behind the highest, or less, is late (not a restart).
const MAX_MISORDER: u16 = 100;
/// A transit difference this large, in seconds, is a timestamp discontinuity, not jitter.
const DISCONTINUITY_S: f64 = 1.0;
/// Sender reports remembered per direction, to match the other side's LSR for round trips.
const SR_MEMORY: usize = 4;

/// Offsets of the RTP fixed header (RFC 3550 §5.1) and of RTCP's common header (§6.4).
mod field {
    use std::ops::Range;
    pub const FLAGS: usize = 0;
    pub const MARKER_PT: usize = 1;
    pub const SEQ: Range<usize> = 2..4;
    pub const TIMESTAMP: Range<usize> = 4..8;
    pub const SSRC: Range<usize> = 8..12;
    pub const FIXED_LEN: usize = 12;
    /// RTCP: the length in 32-bit words minus one.
    pub const RTCP_LENGTH: Range<usize> = 2..4;
    pub const RTCP_HEADER_LEN: usize = 4;
}

fn be16(b: &[u8], at: std::ops::Range<usize>) -> Option<u16> {
    match b.get(at) {
        Some(&[x, y]) => Some(u16::from_be_bytes([x, y])),
        _ => None,
    }
}

fn be32(b: &[u8], at: std::ops::Range<usize>) -> Option<u32> {
    match b.get(at) {
        Some(&[w, x, y, z]) => Some(u32::from_be_bytes([w, x, y, z])),
        _ => None,
    }
}

/// The clock rate of a static payload type (RFC 3551 §6, table 4 and 5; 1, 2 and 19 as RFC
/// 1890 assigned them, as Wireshark does), 0 for dynamic or unassigned types.
pub(crate) fn clock_hz(payload_type: u8) -> u32 {
    match payload_type {
        // PCMU, 1016, G721, GSM, G723, DVI4/8000, LPC, PCMA, G722 (8000 by RFC 3551 §4.5.2),
        // QCELP, CN, G728, G729, old CN.
        0..=5 | 7..=9 | 12 | 13 | 15 | 18 | 19 => 8000,
        6 => 16000,
        10 | 11 => 44100,
        16 => 11025,
        17 => 22050,
        // MPA, CelB, JPEG, nv, H261, MPV, MP2T, H263.
        14 | 25 | 26 | 28 | 31..=34 => 90000,
        _ => 0,
    }
}

/// Why a datagram is not RTP or RTCP as it claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Version other than 2.
    Version,
    /// Shorter than the header its own fields announce (CSRCs, extension, padding, RTCP length).
    Length,
    /// An RTCP compound packet whose first packet is not SR, RR, SDES, BYE or APP, or a
    /// sub-packet type outside RTCP's range.
    RtcpType,
}

/// A borrowed view of an RTP header (RFC 3550 §5.1). `new_checked` validates the fixed part and
/// the lengths against the datagram's wire length once; the accessors cannot fail.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RtpHeader<'a> {
    bytes: &'a [u8],
}

impl<'a> RtpHeader<'a> {
    /// `bytes`: the captured start of a datagram of `wire_len` bytes.
    pub(crate) fn new_checked(bytes: &'a [u8], wire_len: u32) -> Result<Self, Malformed> {
        let h = RtpHeader { bytes };
        if bytes.len() < field::FIXED_LEN || (wire_len as usize) < field::FIXED_LEN {
            return Err(Malformed::Length);
        }
        if h.version() != 2 {
            return Err(Malformed::Version);
        }
        if h.is_rtcp_type() {
            return Err(Malformed::RtcpType);
        }
        // RFC 3550 §5.1: the CSRC list (and the extension header, if flagged) must fit.
        let mut need = field::FIXED_LEN + 4 * h.csrc_count();
        if h.extension() {
            need += 4 + h.extension_words().map_or(0, |w| 4 * usize::from(w));
        }
        if need > wire_len as usize {
            return Err(Malformed::Length);
        }
        // The padding count is not checked: in SRTP the padding is encrypted and the last byte
        // is the authentication tag's (RFC 3711 §3.1), so any value may be there.
        Ok(h)
    }

    fn byte(&self, at: usize) -> u8 {
        self.bytes.get(at).copied().unwrap_or(0)
    }
    pub(crate) fn version(&self) -> u8 {
        self.byte(field::FLAGS) >> 6
    }
    pub(crate) fn padding(&self) -> bool {
        self.byte(field::FLAGS) & 0x20 != 0
    }
    pub(crate) fn extension(&self) -> bool {
        self.byte(field::FLAGS) & 0x10 != 0
    }
    pub(crate) fn csrc_count(&self) -> usize {
        usize::from(self.byte(field::FLAGS) & 0x0f)
    }
    pub(crate) fn marker(&self) -> bool {
        self.byte(field::MARKER_PT) & 0x80 != 0
    }
    pub(crate) fn payload_type(&self) -> u8 {
        self.byte(field::MARKER_PT) & 0x7f
    }
    /// RFC 5761 §4: payload types 64-95 with the marker masked would collide with RTCP's 192-223.
    fn is_rtcp_type(&self) -> bool {
        (64..=95).contains(&self.payload_type())
    }
    pub(crate) fn seq(&self) -> u16 {
        be16(self.bytes, field::SEQ).unwrap_or(0)
    }
    pub(crate) fn timestamp(&self) -> u32 {
        be32(self.bytes, field::TIMESTAMP).unwrap_or(0)
    }
    pub(crate) fn ssrc(&self) -> u32 {
        be32(self.bytes, field::SSRC).unwrap_or(0)
    }
    /// The extension's length in 32-bit words (RFC 3550 §5.3.1), when captured.
    fn extension_words(&self) -> Option<u16> {
        let at = field::FIXED_LEN + 4 * self.csrc_count() + 2;
        be16(self.bytes, at..at + 2)
    }
    /// The header's length with CSRCs and extension, when all of it that says a length was
    /// captured.
    pub(crate) fn header_len(&self) -> Option<usize> {
        let base = field::FIXED_LEN + 4 * self.csrc_count();
        if !self.extension() {
            return Some(base);
        }
        self.extension_words().map(|w| base + 4 + 4 * usize::from(w))
    }
    /// The padding count (RFC 3550 §5.1: the datagram's last byte, itself included) when
    /// padding is flagged, the last byte was captured, and the count fits the datagram (in SRTP
    /// the last byte belongs to the authentication tag: no padding can be told there).
    fn padding_len(&self, wire_len: u32) -> Option<u8> {
        if !self.padding() || self.bytes.len() != wire_len as usize {
            return None;
        }
        let pad = self.bytes.last().copied()?;
        let header = self.header_len()?;
        (pad > 0 && header + usize::from(pad) <= wire_len as usize).then_some(pad)
    }
}

/// What one RTCP compound datagram said (RFC 3550 §6.4): its first sender report and its first
/// report block.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Rtcp {
    /// SR: the middle 32 bits of the NTP timestamp, the sender's packet and octet counts.
    pub sender: Option<(u32, u32, u32)>,
    /// The first report block: fraction lost (/256), cumulative lost, LSR, DLSR (1/65536 s).
    pub report: Option<(u8, i32, u32, u32)>,
    /// The datagram was cut before its end: the walk stopped there.
    pub cut: bool,
    /// The packets after the first could not be read (SRTCP).
    pub opaque: bool,
}

const RTCP_SR: u8 = 200;
const RTCP_RR: u8 = 201;

/// Walks a compound RTCP datagram (`bytes` captured of `wire_len`): every packet version 2, a
/// type in 192-223, lengths adding up to the datagram exactly; the first one SR, RR, SDES, BYE
/// or APP (200-204; RFC 3550 §6.1 wants SR or RR first, but SDES- or BYE-only datagrams are
/// sent). When the first packet is sound but what follows is not a packet, the datagram is
/// taken as SRTCP (RFC 3711 §3.4: everything after the first 8 bytes may be encrypted, and an
/// index and authentication tag follow the compound packet): `opaque`, and nothing past the
/// first packet's SSRC is read.
pub(crate) fn parse_rtcp(bytes: &[u8], wire_len: u32) -> Result<Rtcp, Malformed> {
    let mut out = Rtcp::default();
    let wire_len = wire_len as usize;
    let mut at = 0usize;
    let mut first = true;
    while at < wire_len {
        let Some(head) = bytes.get(at..at + field::RTCP_HEADER_LEN) else {
            if first {
                return Err(Malformed::Length);
            }
            if bytes.len() >= wire_len {
                // Whole datagram captured, yet what follows cannot be a packet: a trailer.
                return Ok(opaque());
            }
            out.cut = true;
            return Ok(out);
        };
        let (flags, pt) = (head[0], head[1]);
        let words = be16(head, field::RTCP_LENGTH).unwrap_or(0);
        let len = (usize::from(words) + 1) * 4;
        let end = at + len;
        let ok_type = if first { (200..=204).contains(&pt) } else { (192..=223).contains(&pt) };
        let problem = if flags >> 6 != 2 {
            Some(Malformed::Version)
        } else if !ok_type {
            Some(Malformed::RtcpType)
        } else if end > wire_len {
            Some(Malformed::Length)
        } else {
            None
        };
        match problem {
            Some(e) if first => return Err(e),
            Some(_) => return Ok(opaque()),
            None => {}
        }
        let packet = bytes.get(at..end.min(bytes.len())).unwrap_or(&[]);
        let count = usize::from(flags & 0x1f);
        // SR (§6.4.1): SSRC, NTP (8), RTP ts, packet count, octet count, then report blocks;
        // RR (§6.4.2): SSRC, then report blocks (24 bytes each).
        let blocks_at = match pt {
            RTCP_SR => {
                if out.sender.is_none() {
                    if let (Some(ntp_mid), Some(pkts), Some(octets)) =
                        (be32(packet, 10..14), be32(packet, 20..24), be32(packet, 24..28))
                    {
                        out.sender = Some((ntp_mid, pkts, octets));
                    }
                }
                Some(28)
            }
            RTCP_RR => Some(8),
            _ => None,
        };
        if let Some(b) = blocks_at {
            if len < b + 24 * count {
                return Err(Malformed::Length);
            }
            if count > 0 && out.report.is_none() {
                if let (Some(lost_word), Some(lsr), Some(dlsr)) =
                    (be32(packet, b + 4..b + 8), be32(packet, b + 16..b + 20), be32(packet, b + 20..b + 24))
                {
                    let fraction = (lost_word >> 24) as u8;
                    // 24-bit signed cumulative count.
                    let cumulative = ((lost_word << 8) as i32) >> 8;
                    out.report = Some((fraction, cumulative, lsr, dlsr));
                }
            }
        }
        first = false;
        at = end;
    }
    if first {
        return Err(Malformed::Length);
    }
    out.cut = bytes.len() < wire_len;
    Ok(out)
}

/// An SRTCP datagram: its first packet read no further than the SSRC.
fn opaque() -> Rtcp {
    Rtcp { opaque: true, ..Rtcp::default() }
}

/// One datagram, classified.
#[derive(Debug, Clone, Copy)]
enum Datagram<'a> {
    Rtp(RtpHeader<'a>),
    Rtcp(Rtcp),
    /// RFC 7983 §7: STUN or DTLS multiplexed on the RTP flow (ICE, DTLS-SRTP), skipped.
    Stun,
    Dtls,
    Bad(Malformed),
}

/// A STUN message (RFC 5389 §6): first byte 0-3 (RFC 7983), the magic cookie, a length that is
/// the datagram's less the 20-byte header, in 32-bit words.
fn is_stun(bytes: &[u8], wire_len: u32) -> bool {
    let (Some(&first), Some(len), Some(cookie)) = (bytes.first(), be16(bytes, 2..4), be32(bytes, 4..8)) else {
        return false;
    };
    first <= 3 && cookie == 0x2112_a442 && len % 4 == 0 && u32::from(len) + 20 == wire_len
}

/// A DTLS record (RFC 7983 §7: first byte 20-63): DTLS 1.0/1.2's content types 20-25 with
/// version 0xfeff or 0xfefd (RFC 6347 §4.1), or DTLS 1.3's unified header, 001xxxxx (RFC 9147
/// §4).
fn is_dtls(bytes: &[u8]) -> bool {
    match bytes {
        [20..=25, 0xfe, 0xff | 0xfd, ..] => true,
        [first, ..] => first >> 5 == 1,
        [] => false,
    }
}

fn classify<'a>(bytes: &'a [u8], wire_len: u32) -> Datagram<'a> {
    let Some(&flags) = bytes.first() else {
        return Datagram::Bad(Malformed::Length);
    };
    if is_stun(bytes, wire_len) {
        return Datagram::Stun;
    }
    if is_dtls(bytes) {
        return Datagram::Dtls;
    }
    if flags >> 6 != 2 {
        return Datagram::Bad(Malformed::Version);
    }
    // RFC 5761 §4: the second byte tells RTCP (192-223) from RTP.
    match bytes.get(field::MARKER_PT) {
        Some(pt) if (192..=223).contains(pt) => match parse_rtcp(bytes, wire_len) {
            Ok(r) => Datagram::Rtcp(r),
            Err(e) => Datagram::Bad(e),
        },
        _ => match RtpHeader::new_checked(bytes, wire_len) {
            Ok(h) => Datagram::Rtp(h),
            Err(e) => Datagram::Bad(e),
        },
    }
}

/// A receiver's state for one direction's stream (RFC 3550 A.1, A.8), beside its public
/// [`RtpStream`].
#[derive(Debug, Clone)]
struct Track {
    max_seq: u16,
    /// Sequence number cycles, shifted (A.1's `cycles`).
    cycles: u64,
    base_seq: u64,
    /// A.1: the sequence number after a large jump; a packet with it restarts the count.
    bad_seq: Option<u16>,
    received: u64,
    /// Losses counted before a restart.
    lost_before: i64,
    /// Which of the 128 sequence numbers up to the highest were seen (bit 0: the highest).
    seen: u128,
    /// The previous packet's arrival time and timestamp, for A.8's transit difference.
    prev: Option<(u64, u32)>,
    jitter_samples: u64,
    jitter_sum: f64,
    /// The last full header length (CSRCs, extension), for cut packets.
    header_len: usize,
}

impl Track {
    fn new(h: &RtpHeader<'_>) -> Track {
        let seq = h.seq();
        Track {
            max_seq: seq,
            cycles: 0,
            base_seq: u64::from(seq),
            bad_seq: None,
            received: 0,
            lost_before: 0,
            seen: 0,
            prev: None,
            jitter_samples: 0,
            jitter_sum: 0.0,
            header_len: h.header_len().unwrap_or(field::FIXED_LEN),
        }
    }

    fn ext_max(&self) -> u64 {
        self.cycles + u64::from(self.max_seq)
    }

    /// RFC 3550 A.1 `update_seq` (without the probation, done by the probe), with duplicates and
    /// late packets told apart through the `seen` window.
    fn update_seq(&mut self, seq: u16, s: &mut RtpStream) {
        let udelta = seq.wrapping_sub(self.max_seq);
        if self.received == 0 {
            self.seen = 1;
        } else if udelta == 0 {
            s.duplicates += 1;
        } else if udelta < MAX_DROPOUT {
            // In order, with a permissible gap.
            if seq < self.max_seq {
                self.cycles += 1 << 16;
            }
            self.max_seq = seq;
            self.seen = if udelta >= 128 { 1 } else { (self.seen << udelta) | 1 };
        } else if udelta <= u16::MAX - MAX_MISORDER + 1 {
            // A very large jump: a restart if the next packet follows it.
            if self.bad_seq == Some(seq) {
                self.lost_before += self.expected() as i64 - self.received as i64;
                self.max_seq = seq;
                self.cycles = 0;
                self.base_seq = u64::from(seq);
                self.received = 0;
                self.seen = 1;
                self.bad_seq = None;
            } else {
                self.bad_seq = Some(seq.wrapping_add(1));
                return;
            }
        } else {
            // Behind the highest: a duplicate or a late packet.
            let behind = self.max_seq.wrapping_sub(seq);
            let bit = 1u128.checked_shl(u32::from(behind)).unwrap_or(0);
            if self.seen & bit != 0 {
                s.duplicates += 1;
            } else {
                self.seen |= bit;
                s.out_of_sequence += 1;
            }
        }
        self.received += 1;
        s.lost = self.lost_before + self.expected() as i64 - self.received as i64;
    }

    /// A.3: extended highest sequence number received minus the first, plus one.
    fn expected(&self) -> u64 {
        (self.ext_max() + 1).saturating_sub(self.base_seq)
    }

    /// RFC 3550 A.8: J += (|D| - J) / 16, D the difference in transit times (timestamp units)
    /// between this packet and the previous one in arrival order.
    fn update_jitter(&mut self, ts_ns: u64, timestamp: u32, clock_hz: u32, s: &mut RtpStream) {
        if let Some((prev_ns, prev_ts)) = self.prev {
            let arrival_units = (i128::from(ts_ns) - i128::from(prev_ns)) as f64 * f64::from(clock_hz) / 1e9;
            // Timestamps wrap: their difference is taken modulo 2^32, signed.
            let d = arrival_units - f64::from(timestamp.wrapping_sub(prev_ts) as i32);
            if d.abs() >= f64::from(clock_hz) * DISCONTINUITY_S {
                // The sender's timestamps jumped (a new timeline, as after a fax switch-over):
                // not network jitter. The transit chain restarts at this packet.
                self.prev = Some((ts_ns, timestamp));
                return;
            }
            s.jitter += (d.abs() - s.jitter) / 16.0;
            self.jitter_samples += 1;
            self.jitter_sum += s.jitter;
            s.jitter_mean = self.jitter_sum / self.jitter_samples as f64;
            if self.jitter_samples == 1 || s.jitter > s.jitter_max {
                s.jitter_max = s.jitter;
            }
            if self.jitter_samples == 1 || s.jitter < s.jitter_min {
                s.jitter_min = s.jitter;
            }
        }
        self.prev = Some((ts_ns, timestamp));
    }
}

/// A new stream's public record, from its first packet.
fn new_stream(h: &RtpHeader<'_>, ts_ns: u64) -> RtpStream {
    RtpStream {
        ssrc: h.ssrc(),
        payload_type: h.payload_type(),
        clock_hz: clock_hz(h.payload_type()),
        first_ns: ts_ns,
        last_ns: ts_ns,
        ..RtpStream::default()
    }
}

/// Adds one packet of the stream's SSRC to its record and receiver state.
fn stream_packet(t: &mut Track, s: &mut RtpStream, h: &RtpHeader<'_>, seg: &Segment<'_>) {
    s.packets += 1;
    s.last_ns = seg.ts_ns;
    if h.marker() {
        s.marker_packets += 1;
    }
    if let Some(len) = h.header_len() {
        t.header_len = len;
    }
    let pad = h.padding_len(seg.wire_len).map_or(0, usize::from);
    let payload = (seg.wire_len as usize).saturating_sub(t.header_len + pad) as u64;
    s.payload_bytes += payload;
    let payload = u32::try_from(payload).unwrap_or(u32::MAX);
    if s.packets == 1 || payload < s.payload_bytes_min {
        s.payload_bytes_min = payload;
    }
    s.payload_bytes_max = s.payload_bytes_max.max(payload);
    t.update_seq(h.seq(), s);
    // Jitter only over packets of the stream's clock: a packet of another payload type (an
    // RFC 4733 event, say) keeps its own timestamps and would add a bogus transit difference.
    if h.payload_type() != s.payload_type {
        s.other_pt_packets += 1;
    }
    let same_clock = h.payload_type() == s.payload_type || clock_hz(h.payload_type()) == s.clock_hz;
    if s.clock_hz != 0 && same_clock {
        t.update_jitter(seg.ts_ns, h.timestamp(), s.clock_hz, s);
    }
}

/// While probing, the last sequence number and timestamp of the first [`PROBE_SSRCS`] SSRCs of
/// each direction: a packet that continues any of them confirms the flow (WebRTC senders open
/// with short-lived SSRCs: probes, retransmissions, events).
#[derive(Debug, Default)]
struct Recent {
    ssrcs: [[Option<(u32, u16, u32)>; PROBE_SSRCS]; 2],
}

impl Recent {
    /// Whether the packet continues its SSRC the way a sender's next packets do; remembers it.
    fn continues(&mut self, dir: Dir, h: &RtpHeader<'_>) -> bool {
        let (ssrc, seq, ts) = (h.ssrc(), h.seq(), h.timestamp());
        let slots = &mut self.ssrcs[dir.min(1)];
        if let Some(slot) = slots.iter_mut().flatten().find(|(s, _, _)| *s == ssrc) {
            let seq_step = seq.wrapping_sub(slot.1);
            let ts_step = ts.wrapping_sub(slot.2) as i32;
            *slot = (ssrc, seq, ts);
            return (1..=PROBE_SEQ_STEP).contains(&seq_step) && ts_step.unsigned_abs() <= PROBE_TS_STEP;
        }
        if let Some(free) = slots.iter_mut().find(|s| s.is_none()) {
            *free = Some((ssrc, seq, ts));
        }
        false
    }
}

/// What a datagram was to the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// It confirms the flow as RTP/RTCP: it continued its direction's stream, or it was a
    /// well-formed RTCP datagram.
    Confirms,
    /// RTP, counted, confirming nothing (a stream's first packet, a repeat, another SSRC).
    Rtp,
    /// SRTCP, counted, confirming nothing: while probing it weighs like STUN and DTLS.
    Opaque,
    Stun,
    Dtls,
}

/// The state shared by probing and after the claim.
#[derive(Debug, Default)]
struct Receiver {
    tracks: [Option<Track>; 2],
    recent: Recent,
    claimed: bool,
    /// The last sender reports seen per direction: NTP middle 32 bits and packet time.
    srs: [[Option<(u32, u64)>; SR_MEMORY]; 2],
    sr_next: [usize; 2],
}

impl Receiver {
    /// Applies one datagram to `rtp`: what it was, or the malformation found.
    fn datagram(&mut self, seg: &Segment<'_>, rtp: &mut RtpFacts) -> Result<Seen, Malformed> {
        let dir: Dir = seg.dir.min(1);
        match classify(seg.bytes, seg.wire_len) {
            Datagram::Bad(e) => Err(e),
            Datagram::Stun => {
                rtp.demuxed_packets += 1;
                Ok(Seen::Stun)
            }
            Datagram::Dtls => {
                rtp.demuxed_packets += 1;
                Ok(Seen::Dtls)
            }
            Datagram::Rtcp(r) => {
                self.rtcp(dir, seg.ts_ns, &r, rtp);
                // Only a compound packet walked to its end is strong evidence; an opaque one
                // (SRTCP) or a cut one may have been checked on its first header only.
                Ok(if r.opaque || r.cut { Seen::Opaque } else { Seen::Confirms })
            }
            Datagram::Rtp(h) => {
                let confirms = !self.claimed && self.recent.continues(dir, &h);
                let (track, stream) = (&mut self.tracks[dir], &mut rtp.dirs[dir]);
                match (track, stream) {
                    (Some(t), Some(s)) if s.ssrc == h.ssrc() => stream_packet(t, s, &h, seg),
                    (Some(_), Some(s)) => s.other_ssrc_packets += 1,
                    (track, stream) => {
                        let mut t = Track::new(&h);
                        let mut s = new_stream(&h, seg.ts_ns);
                        stream_packet(&mut t, &mut s, &h, seg);
                        *track = Some(t);
                        *stream = Some(s);
                    }
                }
                Ok(if confirms { Seen::Confirms } else { Seen::Rtp })
            }
        }
    }

    fn rtcp(&mut self, dir: Dir, ts_ns: u64, r: &Rtcp, rtp: &mut RtpFacts) {
        rtp.rtcp_packets += 1;
        let out = &mut rtp.rtcp[dir];
        out.packets += 1;
        if r.cut {
            out.cut_packets += 1;
        }
        if r.opaque {
            out.opaque_packets += 1;
        }
        if let Some((ntp_mid, pkts, octets)) = r.sender {
            out.sender_packets = Some(pkts);
            out.sender_octets = Some(octets);
            let slot = self.sr_next[dir] % SR_MEMORY;
            if let Some(s) = self.srs[dir].get_mut(slot) {
                *s = Some((ntp_mid, ts_ns));
            }
            self.sr_next[dir] = (slot + 1) % SR_MEMORY;
        }
        if let Some((fraction, cumulative, lsr, dlsr)) = r.report {
            out.fraction_lost = Some(fraction);
            out.reported_lost = Some(cumulative);
            // RFC 3550 §6.4.1: round trip = A - LSR - DLSR; here A and the SR's passage are
            // both the probe's packet times, so this is the round trip between the probe and
            // the reporting side.
            let sr = self.srs[1 - dir].iter().flatten().find(|(mid, _)| lsr != 0 && *mid == lsr);
            if let Some(&(_, sr_ns)) = sr {
                let hold_ns = u64::from(dlsr) * 1_000_000_000 / 65_536;
                if let Some(rtt_ns) = ts_ns.checked_sub(sr_ns).and_then(|d| d.checked_sub(hold_ns)) {
                    out.rtt_samples += 1;
                    out.rtt_sum_ns = out.rtt_sum_ns.saturating_add(rtt_ns);
                    out.rtt_max_ns = out.rtt_max_ns.max(rtt_ns);
                    out.rtt_min_ns = Some(out.rtt_min_ns.map_or(rtt_ns, |m| m.min(rtt_ns)));
                }
            }
        }
    }
}

/// RTP/RTCP parser of one UDP flow: probing, then claimed (see the module docs).
pub(crate) struct RtpParser {
    /// None until a first datagram is accepted: refusing a flow allocates nothing.
    receiver: Option<Box<Receiver>>,
    /// The facts gathered while probing, handed to `Facts` at the claim.
    pending: Option<Box<RtpFacts>>,
    claimed: bool,
    /// The flow opened with STUN (ICE): datagrams that are not RTP are let pass while probing.
    ice: bool,
    /// RTP/RTCP candidates and STUN/DTLS datagrams seen while probing.
    datagrams: u8,
    demuxed: u8,
    confirmations: u8,
}

impl RtpParser {
    pub(crate) fn new() -> Self {
        RtpParser {
            receiver: None,
            pending: None,
            claimed: false,
            ice: false,
            datagrams: 0,
            demuxed: 0,
            confirmations: 0,
        }
    }

    pub(crate) fn segment(&mut self, segment: &Segment<'_>, facts: &mut Facts) -> Verdict {
        let receiver = match self.receiver.as_deref_mut() {
            Some(r) => r,
            None => {
                // Only RTP, RTCP, or the STUN that opens an ICE flow may begin a flow of ours.
                if !matches!(
                    classify(segment.bytes, segment.wire_len),
                    Datagram::Rtp(_) | Datagram::Rtcp(_) | Datagram::Stun
                ) {
                    return Verdict::NotMine;
                }
                self.ice = is_stun(segment.bytes, segment.wire_len);
                self.pending = Some(Box::default());
                self.receiver.insert(Box::default())
            }
        };
        if self.claimed {
            // Every datagram counts.
            let Some(rtp) = facts.rtp.as_deref_mut() else {
                return Verdict::Done;
            };
            if receiver.datagram(segment, rtp).is_err() {
                count(&mut facts.problems);
            }
            return Verdict::More;
        }
        let Some(pending) = self.pending.as_deref_mut() else {
            return Verdict::Done;
        };
        match receiver.datagram(segment, pending) {
            Ok(Seen::Stun | Seen::Dtls | Seen::Opaque) => self.demuxed = self.demuxed.saturating_add(1),
            // An ICE flow may carry the application's own messages too (WhatsApp's "health"
            // keep-alives, its RTCP-like type 199).
            Err(_) if self.ice => self.demuxed = self.demuxed.saturating_add(1),
            // A first RTCP datagram confirms too: its compound walk is a strong check.
            Ok(Seen::Confirms) => {
                self.confirmations += 1;
                self.datagrams = self.datagrams.saturating_add(1);
            }
            Ok(Seen::Rtp) | Err(_) => self.datagrams = self.datagrams.saturating_add(1),
        }
        if self.confirmations >= CONFIRMATIONS {
            facts.rtp = self.pending.take();
            self.claimed = true;
            receiver.claimed = true;
            return Verdict::More;
        }
        if self.datagrams >= PROBE_DATAGRAMS || self.demuxed >= PROBE_DEMUXED {
            return Verdict::Done;
        }
        Verdict::More
    }
}

#[cold]
fn count(problems: &mut Problems) {
    problems.rtp_malformed += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3550 §5.1 fields on literal bytes: V=2 P=0 X=1 CC=1, M=1 PT=8, seq 0xabcd,
    /// timestamp 0x01020304, SSRC 0xdeadbeef, one CSRC, an extension of one word, 4 bytes of
    /// payload.
    const RTP: [u8; 32] = [
        0x91, 0x88, 0xab, 0xcd, 1, 2, 3, 4, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 9, 0xbe, 0xde, 0, 1, 0x10, 0, 0, 0, 0xaa,
        0xbb, 0xcc, 0xdd, 0, 0, 0, 0,
    ];

    #[test]
    fn rtp_header_fields() {
        let h = RtpHeader::new_checked(&RTP[..28], 28).expect("valid");
        assert_eq!((h.version(), h.padding(), h.extension(), h.csrc_count()), (2, false, true, 1));
        assert_eq!(
            (h.marker(), h.payload_type(), h.seq(), h.timestamp(), h.ssrc()),
            (true, 8, 0xabcd, 0x0102_0304, 0xdead_beef)
        );
        assert_eq!(h.header_len(), Some(24));
    }

    #[test]
    fn rtp_header_every_truncation() {
        // Captured and on the wire alike: a broken datagram.
        for len in 0..24 {
            assert!(RtpHeader::new_checked(&RTP[..len], len as u32).is_err(), "{len} bytes");
        }
        // Cut by the capture after 16 bytes of 28: the fixed header is enough; the extension's
        // length is not known, so neither is the header's.
        let h = RtpHeader::new_checked(&RTP[..16], 28).expect("cut is not broken");
        assert_eq!((h.seq(), h.header_len()), (0xabcd, None));
        assert_eq!(RtpHeader::new_checked(&RTP[..11], 28).err(), Some(Malformed::Length));
        let mut v1 = RTP;
        v1[0] = 0x50;
        assert_eq!(RtpHeader::new_checked(&v1, 32).err(), Some(Malformed::Version));
    }

    /// An SR (RFC 3550 §6.4.1) with one report block, then an SDES with one chunk.
    const SR: [u8; 64] = [
        0x81, 200, 0, 12, 0, 0, 0, 7, // V=2 RC=1, SR, length 12, SSRC 7
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // NTP timestamp
        0, 0, 0x10, 0, 0, 0, 0, 50, 0, 0, 0x1f, 0x40, // RTP timestamp, 50 packets, 8000 octets
        0, 0, 0, 9, 0x40, 0xff, 0xff, 0xfe, 0, 0, 1, 0, // block: SSRC 9, fraction 64, lost -2, ext seq
        0, 0, 0, 0x20, 0x33, 0x44, 0x55, 0x66, 0, 1, 0, 0, // jitter, LSR, DLSR 1 s
        0x81, 202, 0, 2, 0, 0, 0, 7, 1, 1, b'x', 0, // SDES: SSRC 7, CNAME "x", end
    ];

    #[test]
    fn rtcp_sender_report_fields() {
        let r = parse_rtcp(&SR, 64).expect("valid");
        assert_eq!(r.sender, Some((0x3344_5566, 50, 8000)));
        assert_eq!(r.report, Some((64, -2, 0x3344_5566, 65536)));
        assert!(!r.cut && !r.opaque);
    }

    #[test]
    fn rtcp_every_truncation() {
        for len in 0..64 {
            // Whole datagrams of that length: the SR does not fit before 52 bytes, is a whole
            // compound packet at 52; between it and the end, what follows is no packet: taken as
            // SRTCP's trailer.
            match parse_rtcp(&SR[..len], len as u32) {
                Ok(r) if len == 52 || len == 64 => assert!(!r.opaque && r.sender.is_some(), "{len}"),
                Ok(r) => assert!(len > 52 && r.opaque && r.sender.is_none(), "{len}"),
                Err(e) => assert!(len < 52 && e == Malformed::Length || len < 2, "{len}: {e:?}"),
            }
            // Cut by the capture: readable while the first header is there.
            match parse_rtcp(&SR[..len], 64) {
                Ok(r) => assert!(len >= 4 && r.cut || len == 64, "{len}"),
                Err(e) => assert!(len < 4, "{len}: {e:?}"),
            }
        }
        let mut bad = SR;
        bad[1] = 205; // a feedback message cannot come first
        assert_eq!(parse_rtcp(&bad, 64).err(), Some(Malformed::RtcpType));
    }

    #[test]
    fn stun_and_dtls_by_rfc7983() {
        let mut stun = vec![0, 1, 0, 4, 0x21, 0x12, 0xa4, 0x42];
        stun.extend_from_slice(&[0; 16]);
        assert!(is_stun(&stun, 24));
        assert!(!is_stun(&stun, 28), "length must be exact");
        stun[4] = 0;
        assert!(!is_stun(&stun, 24), "magic cookie");
        assert!(is_dtls(&[22, 0xfe, 0xfd, 0]) && is_dtls(&[0x2c, 0, 0]) && !is_dtls(&[22, 3, 3]) && !is_dtls(&[]));
    }

    #[test]
    fn static_clock_rates_rfc3551() {
        let rates: Vec<(u8, u32)> = (0..=127).map(|pt| (pt, clock_hz(pt))).filter(|&(_, hz)| hz != 0).collect();
        assert_eq!(rates.iter().filter(|&&(_, hz)| hz == 90000).count(), 8);
        assert_eq!(
            (clock_hz(0), clock_hz(9), clock_hz(6), clock_hz(10), clock_hz(34), clock_hz(96)),
            (8000, 8000, 16000, 44100, 90000, 0)
        );
    }
}
