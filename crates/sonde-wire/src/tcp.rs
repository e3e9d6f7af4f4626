//! TCP header view (RFC 9293) and the options walk.

use crate::bytes::{be16, be32, clamp, u8_at};
use crate::{TcpFlags, TcpOptions, TcpSummary, Transport, WireError};

/// IP protocol number.
pub const PROTOCOL: u8 = 6;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFFSET_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
    pub const HEADER_LEN: usize = 20;
}

/// Option kinds the walk understands.
pub mod option_kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMP: u8 = 8;
}

/// A borrowed TCP header. `new_checked` guarantees the fixed 20 bytes; options may be cut.
#[derive(Debug, Clone, Copy)]
pub struct TcpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> TcpHeader<'a> {
    pub const MIN_LEN: usize = field::HEADER_LEN;
    // Where fields are, for code that rewrites them in place (sonde-rewrite).
    pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

    pub fn new_unchecked(buf: &'a [u8]) -> Self {
        TcpHeader { buf }
    }

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self::new_unchecked(buf))
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }

    pub fn seq(&self) -> u32 {
        be32(self.buf, field::SEQ)
    }

    pub fn ack(&self) -> u32 {
        be32(self.buf, field::ACK)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(u8_at(self.buf, field::OFFSET_FLAGS) >> 4) * 4
    }

    /// The eight flags plus NS in bit 8.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(be16(self.buf, field::OFFSET_FLAGS) & 0x01ff)
    }

    pub fn window(&self) -> u16 {
        be16(self.buf, field::WINDOW)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }

    pub fn urgent(&self) -> u16 {
        be16(self.buf, field::URGENT)
    }

    /// The options area as captured (possibly cut short).
    pub fn options(&self) -> &'a [u8] {
        clamp(self.buf, field::HEADER_LEN, self.header_len())
    }
}

/// Walks an options area. Unknown options are skipped by their length; the walk stops quietly
/// at EOL, at a length below 2, and at an option that runs past the end (cut by the snaplen).
/// Known options with a wrong length are ignored.
pub fn parse_options(opts: &[u8]) -> TcpOptions {
    let mut out = TcpOptions::default();
    parse_options_into(opts, &mut out);
    out
}

/// [`parse_options`] into an existing (default) value, to spare a copy on the hot path.
#[inline]
pub fn parse_options_into(opts: &[u8], out: &mut TcpOptions) {
    // What nearly every segment after the handshake carries: nothing, or (Linux, the BSDs) NOP,
    // NOP, timestamps. Read directly; the walk below gives the same result, several times slower.
    if opts.is_empty() {
        return;
    }
    if opts.len() == NOP_NOP_TIMESTAMP.len() && opts[..4] == NOP_NOP_TIMESTAMP[..4] {
        out.timestamp = Some((be32(opts, 4), be32(opts, 8)));
        return;
    }
    walk_options(opts, out);
}

/// The common options area of [`parse_options_into`]'s fast path (TSval and TSecr zero here).
const NOP_NOP_TIMESTAMP: [u8; 12] =
    [option_kind::NOP, option_kind::NOP, option_kind::TIMESTAMP, 10, 0, 0, 0, 0, 0, 0, 0, 0];

fn walk_options(opts: &[u8], out: &mut TcpOptions) {
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            option_kind::EOL => break,
            option_kind::NOP => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let Some(&len) = opts.get(i + 1) else { break };
        let len = usize::from(len);
        if len < 2 {
            break;
        }
        let Some(body) = opts.get(i + 2..i + len) else {
            break;
        };
        match (kind, body.len()) {
            (option_kind::MSS, 2) => out.mss = Some(be16(body, 0)),
            (option_kind::WINDOW_SCALE, 1) => out.window_scale = Some(u8_at(body, 0)),
            (option_kind::SACK_PERMITTED, 0) => out.sack_permitted = true,
            (option_kind::SACK, n) if n >= 8 && n % 8 == 0 => {
                let mut count = 0u8;
                for (slot, block) in out.sack_blocks.iter_mut().zip(body.chunks_exact(8)) {
                    *slot = (be32(block, 0), be32(block, 4));
                    count += 1;
                }
                out.sack_count = count;
            }
            (option_kind::TIMESTAMP, 8) => out.timestamp = Some((be32(body, 0), be32(body, 4))),
            _ => {}
        }
        i += len;
    }
}

/// Summarises a TCP segment from its captured bytes and its declared length (IP payload
/// length). The error says why the header could not be read whole: `Truncated` when the
/// captured bytes end inside it, `Malformed` when its length fields are impossible.
#[inline(always)]
pub(crate) fn summarize_into(bytes: &[u8], declared: usize, slot: &mut Option<Transport>) -> Option<WireError> {
    let Ok(h) = TcpHeader::new_checked(bytes) else {
        *slot = Some(Transport::Truncated { protocol: PROTOCOL });
        return Some(if declared < field::HEADER_LEN { WireError::Malformed } else { WireError::Truncated });
    };
    let header_len = h.header_len();
    let payload_len = declared.checked_sub(header_len);
    // Built in place: the summary is large enough for copies to show in profiles.
    let Transport::Tcp(s) = slot.insert(Transport::Tcp(TcpSummary {
        src_port: h.src_port(),
        dst_port: h.dst_port(),
        seq: h.seq(),
        ack: h.ack(),
        flags: h.flags(),
        window: h.window(),
        header_len: header_len as u16,
        payload_len: 0,
        options: TcpOptions::default(),
    })) else {
        return None;
    };
    if header_len < field::HEADER_LEN {
        return Some(WireError::Malformed);
    }
    parse_options_into(h.options(), &mut s.options);
    let Some(payload_len) = payload_len else {
        return Some(WireError::Malformed);
    };
    s.payload_len = u32::try_from(payload_len).unwrap_or(u32::MAX);
    (header_len > bytes.len()).then_some(WireError::Truncated)
}

#[cfg(test)]
pub(crate) fn summarize(bytes: &[u8], declared: usize) -> (Transport, Option<WireError>) {
    let mut slot = None;
    let err = summarize_into(bytes, declared, &mut slot);
    (slot.unwrap_or(Transport::Other { protocol: 0 }), err)
}

#[cfg(test)]
pub(crate) mod build {
    /// Writes a TCP header with `opts` (length a multiple of 4) into `out`; returns its length.
    pub(crate) fn header(out: &mut [u8], sport: u16, dport: u16, seq: u32, ack: u32, flags: u8, opts: &[u8]) -> usize {
        let len = 20 + opts.len();
        out[0..2].copy_from_slice(&sport.to_be_bytes());
        out[2..4].copy_from_slice(&dport.to_be_bytes());
        out[4..8].copy_from_slice(&seq.to_be_bytes());
        out[8..12].copy_from_slice(&ack.to_be_bytes());
        out[12] = ((len / 4) as u8) << 4;
        out[13] = flags;
        out[14..16].copy_from_slice(&65535u16.to_be_bytes());
        out[16..20].fill(0);
        out[20..len].copy_from_slice(opts);
        len
    }

    /// MSS 1460, SACK-permitted, timestamps (1, 0), NOP, window scale 7: a Linux SYN.
    pub(crate) const SYN_OPTS: [u8; 20] = [2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYN: [u8; 40] = [
        0xc3, 0x50, 0x00, 0x50, // 50000 → 80
        0x01, 0x02, 0x03, 0x04, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0xa0, 0xc2, 0xfa, 0xf0, // doff 10, CWR ECE SYN, window 64240
        0xab, 0xcd, 0x00, 0x07, // checksum, urgent
        2, 4, 5, 0xb4, 4, 2, 8, 10, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 1, 3, 3, 7,
    ];

    #[test]
    fn fields() {
        let h = TcpHeader::new_checked(&SYN).unwrap();
        assert_eq!(h.src_port(), 50000);
        assert_eq!(h.dst_port(), 80);
        assert_eq!(h.seq(), 0x01020304);
        assert_eq!(h.ack(), 0);
        assert_eq!(h.header_len(), 40);
        assert_eq!(h.flags().0, 0xc2);
        assert!(h.flags().syn() && !h.flags().ack());
        assert_eq!(h.window(), 64240);
        assert_eq!(h.checksum(), 0xabcd);
        assert_eq!(h.urgent(), 7);
        assert_eq!(h.options().len(), 20);
        let o = parse_options(h.options());
        assert_eq!(o.mss, Some(1460));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamp, Some((0x11223344, 0)));
        assert_eq!(o.window_scale, Some(7));
        assert_eq!(o.sack_count, 0);
    }

    #[test]
    fn ns_flag() {
        let mut b = SYN;
        b[12] = 0xa1;
        assert_eq!(TcpHeader::new_checked(&b).unwrap().flags().0, 0x1c2);
    }

    #[test]
    fn summarize_whole() {
        let (t, err) = summarize(&SYN, 40 + 100);
        assert_eq!(err, None);
        let Transport::Tcp(s) = t else { panic!("{t:?}") };
        assert_eq!((s.src_port, s.dst_port, s.seq, s.header_len, s.payload_len), (50000, 80, 0x01020304, 40, 100));
        assert_eq!(s.window, 64240);
        assert_eq!(s.options.mss, Some(1460));
    }

    #[test]
    fn summarize_every_cut() {
        for cut in 0..20 {
            let (t, err) = summarize(&SYN[..cut], 40);
            assert_eq!(t, Transport::Truncated { protocol: 6 });
            assert_eq!(err, Some(WireError::Truncated));
        }
        for cut in 20..40 {
            let (t, err) = summarize(&SYN[..cut], 40);
            assert_eq!(err, Some(WireError::Truncated), "cut {cut}");
            let Transport::Tcp(s) = t else { panic!() };
            assert_eq!((s.src_port, s.seq, s.header_len, s.payload_len), (50000, 0x01020304, 40, 0));
            // Options cut by the snaplen are simply absent.
            assert_eq!(s.options.mss.is_some(), cut >= 24);
            assert_eq!(s.options.sack_permitted, cut >= 26);
            assert_eq!(s.options.timestamp.is_some(), cut >= 36);
            assert_eq!(s.options.window_scale.is_some(), cut >= 40);
        }
    }

    #[test]
    fn summarize_malformed() {
        // Declared length too small for the fixed header.
        let (t, err) = summarize(&SYN[..10], 10);
        assert_eq!((t, err), (Transport::Truncated { protocol: 6 }, Some(WireError::Malformed)));
        // Data offset beyond the IP payload: payload would be negative.
        let (t, err) = summarize(&SYN, 30);
        assert_eq!(err, Some(WireError::Malformed));
        let Transport::Tcp(s) = t else { panic!() };
        assert_eq!((s.payload_len, s.dst_port), (0, 80));
        // Data offset below 5.
        let mut b = SYN;
        b[12] = 0x40;
        let (t, err) = summarize(&b, 40);
        assert_eq!(err, Some(WireError::Malformed));
        let Transport::Tcp(s) = t else { panic!() };
        assert_eq!((s.header_len, s.payload_len), (16, 0));
    }

    #[test]
    fn options_sack_and_unknown() {
        let opts = [
            1, 1, // NOP NOP
            30, 6, 9, 9, 9, 9, // unknown (MPTCP) option, skipped
            5, 26, // SACK, 3 blocks
            0, 0, 0, 1, 0, 0, 0, 2, //
            0, 0, 0, 3, 0, 0, 0, 4, //
            0, 0, 0, 5, 0, 0, 0, 6, //
            0, // EOL
            2, 4, 1, 0, // after EOL: ignored
        ];
        let o = parse_options(&opts);
        assert_eq!(o.sack_count, 3);
        assert_eq!(o.sack_blocks[..3], [(1, 2), (3, 4), (5, 6)]);
        assert_eq!(o.mss, None);
    }

    #[test]
    fn options_five_sack_blocks_keep_four() {
        let mut opts = [0u8; 42];
        opts[0] = 5;
        opts[1] = 42;
        for i in 0..5u32 {
            let at = 2 + 8 * i as usize;
            opts[at..at + 4].copy_from_slice(&(i * 10).to_be_bytes());
            opts[at + 4..at + 8].copy_from_slice(&(i * 10 + 5).to_be_bytes());
        }
        let o = parse_options(&opts);
        assert_eq!(o.sack_count, 4);
        assert_eq!(o.sack_blocks[3], (30, 35));
    }

    #[test]
    fn options_fast_path_agrees_with_the_walk() {
        let ts = [1, 1, 8, 10, 0, 0, 0, 7, 0xff, 0, 0, 1];
        let mut cases: Vec<Vec<u8>> = vec![ts.to_vec(), vec![], ts[..11].to_vec(), [&ts[..], &[0]].concat()];
        for at in 0..4 {
            // Any change to the layout bytes leaves the fast path.
            let mut c = ts;
            c[at] ^= 0x0b;
            cases.push(c.to_vec());
        }
        for opts in cases {
            let mut walked = TcpOptions::default();
            walk_options(&opts, &mut walked);
            assert_eq!(parse_options(&opts), walked, "{opts:?}");
        }
        assert_eq!(parse_options(&ts).timestamp, Some((7, 0xff00_0001)));
    }

    #[test]
    fn options_malformed_lengths() {
        // Length 0 and 1 stop the walk; MSS with a wrong length is ignored; overrun stops.
        assert_eq!(parse_options(&[2, 0, 5, 0xb4]), TcpOptions::default());
        assert_eq!(parse_options(&[3, 1, 7]), TcpOptions::default());
        assert!(parse_options(&[2, 3, 5, 4, 2, 0]).sack_permitted);
        assert_eq!(parse_options(&[2, 3, 5, 4, 2, 0]).mss, None);
        assert_eq!(parse_options(&[8, 10, 0, 0, 0, 1]).timestamp, None);
        assert_eq!(parse_options(&[5, 7, 0, 0, 0, 1, 0]).sack_count, 0);
        assert_eq!(parse_options(&[1, 2]), TcpOptions::default());
        assert_eq!(parse_options(&[]), TcpOptions::default());
    }

    #[test]
    fn build_then_parse() {
        let mut b = [0u8; 60];
        let n = build::header(&mut b, 1, 2, 3, 4, 0x12, &build::SYN_OPTS);
        let h = TcpHeader::new_checked(&b[..n]).unwrap();
        assert_eq!((h.src_port(), h.dst_port(), h.seq(), h.ack(), h.header_len()), (1, 2, 3, 4, 40));
        assert!(h.flags().syn() && h.flags().ack());
        let o = parse_options(h.options());
        assert_eq!((o.mss, o.window_scale, o.timestamp, o.sack_permitted), (Some(1460), Some(7), Some((1, 0)), true));
    }
}
