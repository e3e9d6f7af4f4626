//! Unit tests on hand-built files: every format and variant, read both from memory (the mapped
//! path) and through a stream that trickles a few bytes per read (the buffered path), and every
//! truncation point of each.

use std::io::Write;

use crate::stream::tests::Trickle;
use crate::{open_bytes, open_reader, CaptureError, CaptureErrorKind, PacketSource};

/// (ts_ns, wire_len, link_type, data) of one frame.
type Got = (u64, u32, u32, Vec<u8>);

fn drain(src: &mut dyn PacketSource) -> (Vec<Got>, Option<CaptureError>) {
    let mut out = Vec::new();
    loop {
        match src.next_frame() {
            Ok(Some(f)) => out.push((f.ts_ns, f.wire_len, f.link_type, f.data.to_vec())),
            Ok(None) => {
                // A clean end has consumed everything.
                if let Some(size) = src.size_hint() {
                    assert_eq!(src.position(), size);
                }
                return (out, None);
            }
            Err(e) => {
                // An error ends the input.
                assert!(matches!(src.next_frame(), Ok(None)));
                assert!(matches!(src.next_frame(), Ok(None)));
                return (out, Some(e));
            }
        }
    }
}

/// Reads `bytes` through the slice path and the stream path; both must agree.
fn read(bytes: &[u8]) -> Result<(String, Vec<Got>, Option<CaptureError>), CaptureError> {
    let a = open_bytes(bytes.to_vec()).map(|mut s| {
        let fmt = s.format().to_string();
        let (f, e) = drain(s.as_mut());
        (fmt, f, e)
    });
    for chunk in [1, 3, 4096] {
        let t = Trickle { data: bytes.to_vec(), pos: 0, chunk };
        let b = open_reader(t).map(|mut s| {
            let fmt = s.format().to_string();
            let (f, e) = drain(s.as_mut());
            (fmt, f, e)
        });
        match (&a, &b) {
            (Ok(x), Ok(y)) => {
                assert_eq!(x.0, y.0);
                assert_eq!(x.1, y.1, "slice and stream frames differ");
                assert_eq!(err_sig(&x.2), err_sig(&y.2));
            }
            (Err(x), Err(y)) => {
                assert_eq!(err_sig(&Some(clone_err(x))), err_sig(&Some(clone_err(y))))
            }
            _ => panic!("slice and stream disagree on opening: {:?} / {:?}", a.as_ref().err(), b.as_ref().err()),
        }
    }
    a
}

fn clone_err(e: &CaptureError) -> CaptureError {
    let kind = match &e.kind {
        CaptureErrorKind::Io(x) => CaptureErrorKind::Io(std::io::Error::new(x.kind(), x.to_string())),
        CaptureErrorKind::NotACapture { magic } => CaptureErrorKind::NotACapture { magic: *magic },
        CaptureErrorKind::Unsupported(w) => CaptureErrorKind::Unsupported(w),
        CaptureErrorKind::Truncated => CaptureErrorKind::Truncated,
        CaptureErrorKind::Corrupt(w) => CaptureErrorKind::Corrupt(w),
        CaptureErrorKind::Decompress(w) => CaptureErrorKind::Decompress(w.clone()),
        CaptureErrorKind::Empty => CaptureErrorKind::Empty,
    };
    CaptureError { kind, offset: e.offset }
}

/// Comparable summary of an error: kind name and offset.
fn err_sig(e: &Option<CaptureError>) -> Option<(String, u64)> {
    e.as_ref().map(|e| {
        let k = format!("{:?}", e.kind);
        (k.split(['(', ' ']).next().unwrap_or("").to_string(), e.offset)
    })
}

fn ok(bytes: &[u8]) -> (String, Vec<Got>) {
    let (fmt, frames, err) = read(bytes).expect("open");
    assert!(err.is_none(), "unexpected error {:?}", err);
    (fmt, frames)
}

// ---- builders --------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum E {
    Le,
    Be,
}

fn u16b(e: E, v: u16) -> [u8; 2] {
    if e == E::Le {
        v.to_le_bytes()
    } else {
        v.to_be_bytes()
    }
}

fn u32b(e: E, v: u32) -> [u8; 4] {
    if e == E::Le {
        v.to_le_bytes()
    } else {
        v.to_be_bytes()
    }
}

fn pcap_header(e: E, magic: u32, major: u16, minor: u16, linktype: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(u32b(e, magic));
    v.extend(u16b(e, major));
    v.extend(u16b(e, minor));
    v.extend(u32b(e, 0));
    v.extend(u32b(e, 0));
    v.extend(u32b(e, 64)); // snaplen
    v.extend(u32b(e, linktype));
    v
}

fn pcap_record(e: E, secs: u32, frac: u32, data: &[u8], wire: u32, modified: bool) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(u32b(e, secs));
    v.extend(u32b(e, frac));
    v.extend(u32b(e, data.len() as u32));
    v.extend(u32b(e, wire));
    if modified {
        v.extend([0u8; 8]);
    }
    v.extend(data);
    v
}

/// A pcap file and the offsets where each record starts (and the end).
fn pcap_file(e: E, magic: u32, modified: bool) -> (Vec<u8>, Vec<usize>) {
    let mut f = pcap_header(e, magic, 2, 4, 1);
    let mut starts = Vec::new();
    for (i, len) in [10usize, 0, 100].iter().enumerate() {
        starts.push(f.len());
        let data: Vec<u8> = (0..*len).map(|b| (b + i) as u8).collect();
        f.extend(pcap_record(e, 1_000 + i as u32, 500, &data, *len as u32 + 4, modified));
    }
    starts.push(f.len());
    (f, starts)
}

fn block(e: E, btype: u32, body: &[u8]) -> Vec<u8> {
    let pad = (4 - body.len() % 4) % 4;
    let len = (12 + body.len() + pad) as u32;
    let mut v = Vec::new();
    v.extend(u32b(e, btype));
    v.extend(u32b(e, len));
    v.extend(body);
    v.extend(vec![0u8; pad]);
    v.extend(u32b(e, len));
    v
}

fn shb(e: E) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u32b(e, 0x1A2B_3C4D));
    b.extend(u16b(e, 1));
    b.extend(u16b(e, 0));
    b.extend([0xff; 8]); // section length unknown
    block(e, 0x0A0D_0D0A, &b)
}

fn idb(e: E, linktype: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u16b(e, linktype));
    b.extend(u16b(e, 0));
    b.extend(u32b(e, snaplen));
    for (code, val) in opts {
        b.extend(u16b(e, *code));
        b.extend(u16b(e, val.len() as u16));
        b.extend(*val);
        b.extend(vec![0u8; (4 - val.len() % 4) % 4]);
    }
    if !opts.is_empty() {
        b.extend([0u8; 4]); // opt_endofopt
    }
    block(e, 1, &b)
}

fn epb(e: E, iface: u32, ts: u64, data: &[u8], wire: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u32b(e, iface));
    b.extend(u32b(e, (ts >> 32) as u32));
    b.extend(u32b(e, ts as u32));
    b.extend(u32b(e, data.len() as u32));
    b.extend(u32b(e, wire));
    b.extend(data);
    block(e, 6, &b)
}

fn opb(e: E, iface: u16, ts: u64, data: &[u8], wire: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u16b(e, iface));
    b.extend(u16b(e, 0));
    b.extend(u32b(e, (ts >> 32) as u32));
    b.extend(u32b(e, ts as u32));
    b.extend(u32b(e, data.len() as u32));
    b.extend(u32b(e, wire));
    b.extend(data);
    block(e, 2, &b)
}

fn spb(e: E, data: &[u8], wire: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u32b(e, wire));
    b.extend(data);
    block(e, 3, &b)
}

fn erf_record(ts: u64, rtype: u8, exts: usize, payload: &[u8], wlen: u16) -> Vec<u8> {
    let eth = matches!(rtype & 0x7f, 2 | 11 | 16 | 20);
    let rlen = 16 + exts * 8 + usize::from(eth) * 2 + payload.len();
    let mut v = Vec::new();
    v.extend(ts.to_le_bytes());
    v.push(if exts > 0 { rtype | 0x80 } else { rtype });
    v.push(0x04); // varlen
    v.extend((rlen as u16).to_be_bytes());
    v.extend(0u16.to_be_bytes());
    v.extend(wlen.to_be_bytes());
    for i in 0..exts {
        let more = if i + 1 < exts { 0x80 } else { 0 };
        v.extend([more | 0x01, 0, 0, 0, 0, 0, 0, 0]);
    }
    if eth {
        v.extend([0, 0]);
    }
    v.extend(payload);
    v
}

// ---- pcap ------------------------------------------------------------------------------------

#[test]
fn pcap_variants() {
    for (e, magic, modified, fmt, frac_ns) in [
        (E::Le, 0xa1b2_c3d4, false, "pcap-le-usec", 500_000),
        (E::Be, 0xa1b2_c3d4, false, "pcap-be-usec", 500_000),
        (E::Le, 0xa1b2_3c4d, false, "pcap-le-nsec", 500),
        (E::Be, 0xa1b2_3c4d, false, "pcap-be-nsec", 500),
        (E::Le, 0xa1b2_cd34, true, "pcap-le-modified", 500_000),
        (E::Be, 0xa1b2_cd34, true, "pcap-be-modified", 500_000),
    ] {
        let (f, _) = pcap_file(e, magic, modified);
        let (got_fmt, frames) = ok(&f);
        assert_eq!(got_fmt, fmt);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0].0, 1_000_000_000_000 + frac_ns);
        assert_eq!(frames[0].1, 14);
        assert_eq!(frames[0].2, 1);
        assert_eq!(frames[0].3, (0..10u8).collect::<Vec<_>>());
        assert!(frames[1].3.is_empty());
        assert_eq!(frames[2].3.len(), 100);
    }
}

#[test]
fn pcap_truncation_points() {
    for (e, magic, modified) in [(E::Le, 0xa1b2_c3d4, false), (E::Be, 0xa1b2_cd34, true)] {
        let (f, starts) = pcap_file(e, magic, modified);
        for n in 0..f.len() {
            let cut = &f[..n];
            match n {
                0 => assert!(matches!(read(cut).err().map(|e| e.kind), Some(CaptureErrorKind::Empty))),
                1..=3 => assert!(matches!(read(cut).err().map(|e| e.kind), Some(CaptureErrorKind::NotACapture { .. }))),
                4..=23 => {
                    let err = read(cut).expect_err("header cut");
                    assert!(matches!(err.kind, CaptureErrorKind::Truncated));
                    assert_eq!(err.offset, 0);
                }
                _ => {
                    let (_, frames, err) = read(cut).expect("open");
                    let complete = starts.iter().skip(1).filter(|&&s| s <= n).count();
                    assert_eq!(frames.len(), complete, "cut at {n}");
                    if starts.contains(&n) {
                        assert!(err.is_none(), "cut at record boundary {n}");
                    } else {
                        let err = err.expect("truncated");
                        assert!(matches!(err.kind, CaptureErrorKind::Truncated), "cut at {n}");
                        assert_eq!(err.offset as usize, starts[complete], "cut at {n}");
                    }
                }
            }
        }
    }
}

#[test]
fn pcap_quirks() {
    // Linktype with FCS bits set (libpcap LT_FCS_LENGTH): masked off.
    let mut f = pcap_header(E::Le, 0xa1b2_c3d4, 2, 4, 0x6000_0001);
    f.extend(pcap_record(E::Le, 1, 2, &[1, 2, 3], 3, false));
    assert_eq!(ok(&f).1[0].2, 1);

    // caplen larger than the snaplen (64) is read when the bytes are there.
    let mut f = pcap_header(E::Le, 0xa1b2_c3d4, 2, 4, 1);
    f.extend(pcap_record(E::Le, 1, 2, &[7; 200], 200, false));
    assert_eq!(ok(&f).1[0].3.len(), 200);

    // Version 2.1 with the lengths in the old order (orig first): swapped back.
    let mut f = pcap_header(E::Be, 0xa1b2_c3d4, 2, 1, 1);
    let mut r = pcap_record(E::Be, 1, 2, &[9; 20], 60, false);
    r[8..12].copy_from_slice(&60u32.to_be_bytes());
    r[12..16].copy_from_slice(&20u32.to_be_bytes());
    r.truncate(16 + 20);
    f.extend(r);
    let frames = ok(&f).1;
    assert_eq!((frames[0].1, frames[0].3.len()), (60, 20));

    // Odd versions (1.4, 2.5) keep the standard record layout.
    for (maj, min) in [(1, 4), (2, 5)] {
        let mut f = pcap_header(E::Le, 0xa1b2_c3d4, maj, min, 1);
        f.extend(pcap_record(E::Le, 1, 2, &[1; 30], 30, false));
        assert_eq!(ok(&f).1.len(), 1);
    }

    // Absurd caplen: Corrupt at the record, no huge allocation.
    let mut f = pcap_header(E::Le, 0xa1b2_c3d4, 2, 4, 1);
    f.extend(pcap_record(E::Le, 1, 2, &[1; 4], 4, false));
    let bad_at = f.len();
    let mut r = pcap_record(E::Le, 1, 2, &[], 0, false);
    r[8..12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    f.extend(r);
    let (_, frames, err) = read(&f).expect("open");
    assert_eq!(frames.len(), 1);
    let err = err.expect("corrupt");
    assert!(matches!(err.kind, CaptureErrorKind::Corrupt(_)));
    assert_eq!(err.offset as usize, bad_at);
}

// ---- pcapng ----------------------------------------------------------------------------------

/// Two sections of opposite byte order; the first has two interfaces (Ethernet in µs with an
/// offset, raw IP in 2^-10 s), the second one interface in ns. Also NRB-like and custom blocks.
fn pcapng_file() -> (Vec<u8>, Vec<(usize, bool)>) {
    let mut f = Vec::new();
    // (start of block, is a packet block)
    let mut blocks = Vec::new();
    let mut push = |f: &mut Vec<u8>, b: Vec<u8>, pkt: bool| {
        blocks.push((f.len(), pkt));
        f.extend(b);
    };
    let l = E::Le;
    push(&mut f, shb(l), false);
    push(&mut f, idb(l, 1, 0, &[(14, &10i64.to_le_bytes())]), false);
    push(&mut f, idb(l, 101, 4, &[(9, &[0x80 | 10]), (2, b"eth1")]), false);
    push(&mut f, epb(l, 0, 1_500_000, &[1, 2, 3, 4, 5], 60), true);
    push(&mut f, block(l, 4, &[0u8; 12]), false); // NRB
    push(&mut f, epb(l, 1, 2048, &[6; 7], 7), true);
    push(&mut f, block(l, 0x0000_0BAD, &[1, 2, 3]), false); // custom block
    push(&mut f, spb(l, &[8; 10], 10), true); // iface 0: snaplen 0 = unlimited
    push(&mut f, opb(l, 1, 1024, &[9; 3], 3), true);
    let b = E::Be;
    push(&mut f, shb(b), false);
    push(&mut f, idb(b, 113, 6, &[(9, &[9])]), false);
    push(&mut f, epb(b, 0, 123_456_789, &[10; 8], 8), true);
    push(&mut f, spb(b, &[11; 10], 10), true); // snaplen 6 cuts it
    blocks.push((f.len(), false));
    (f, blocks)
}

#[test]
fn pcapng_sections_interfaces() {
    let (f, _) = pcapng_file();
    let (fmt, frames) = ok(&f);
    assert_eq!(fmt, "pcapng-le");
    let summary: Vec<(u64, u32, u32, usize)> = frames.iter().map(|g| (g.0, g.1, g.2, g.3.len())).collect();
    assert_eq!(
        summary,
        vec![
            (11_500_000_000, 60, 1, 5), // 1.5 s + if_tsoffset 10 s
            (2_000_000_000, 7, 101, 7), // 2048 / 1024 s
            (0, 10, 1, 10),             // SPB: no timestamp
            (1_000_000_000, 3, 101, 3), // OPB on interface 1
            (123_456_789, 8, 113, 8),   // second section, big-endian, ns
            (0, 10, 113, 6),            // SPB cut to the snaplen
        ]
    );
    assert_eq!(frames[0].3, vec![1, 2, 3, 4, 5]);
}

#[test]
fn pcapng_truncation_points() {
    let (f, blocks) = pcapng_file();
    let ends: Vec<usize> = blocks.iter().skip(1).map(|b| b.0).collect();
    for n in 1..f.len() {
        let cut = &f[..n];
        if n < 4 {
            assert!(matches!(read(cut).err().map(|e| e.kind), Some(CaptureErrorKind::NotACapture { .. })));
            continue;
        }
        if n < 12 {
            let err = read(cut).expect_err("SHB cut");
            assert!(matches!(err.kind, CaptureErrorKind::Truncated));
            assert_eq!(err.offset, 0);
            continue;
        }
        let (_, frames, err) = read(cut).expect("open");
        // Packet blocks whose end is within the cut.
        let complete = blocks.windows(2).filter(|w| w[0].1 && w[1].0 <= n).count();
        assert_eq!(frames.len(), complete, "cut at {n}");
        if ends.contains(&n) {
            assert!(err.is_none(), "cut at block boundary {n}");
        } else {
            let err = err.expect("truncated");
            assert!(matches!(err.kind, CaptureErrorKind::Truncated), "cut at {n}: {err}");
            let start = blocks.iter().rev().find(|b| b.0 <= n).map(|b| b.0);
            assert_eq!(Some(err.offset as usize), start, "cut at {n}");
        }
    }
}

#[test]
fn pcapng_corrupt_blocks() {
    let l = E::Le;
    let head = [shb(l), idb(l, 1, 0, &[])].concat();
    let good = epb(l, 0, 1, &[1; 4], 4);
    let check = |bad: Vec<u8>| {
        let f = [head.clone(), good.clone(), bad].concat();
        let (_, frames, err) = read(&f).expect("open");
        assert_eq!(frames.len(), 1);
        let err = err.expect("corrupt");
        assert!(matches!(err.kind, CaptureErrorKind::Corrupt(_)), "{err}");
        assert_eq!(err.offset as usize, head.len() + good.len());
    };
    // Total length not a multiple of 4.
    let mut b = epb(l, 0, 1, &[1; 4], 4);
    let n = b.len() as u32;
    b[4..8].copy_from_slice(&(n - 2).to_le_bytes());
    check(b);
    // Trailing length differs from the leading one.
    let mut b = epb(l, 0, 1, &[1; 4], 4);
    let n = b.len();
    b[n - 4..].copy_from_slice(&(n as u32 + 4).to_le_bytes());
    check(b);
    // Too small to be a block.
    let mut b = vec![0u8; 12];
    b[..4].copy_from_slice(&6u32.to_le_bytes());
    b[4..8].copy_from_slice(&8u32.to_le_bytes());
    check(b);
    // Absurd length.
    let mut b = epb(l, 0, 1, &[1; 4], 4);
    b[4..8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    check(b);
    // Packet for an interface never declared.
    check(epb(l, 3, 1, &[1; 4], 4));
    // Captured length beyond the block.
    let mut b = epb(l, 0, 1, &[1; 4], 4);
    b[20..24].copy_from_slice(&100u32.to_le_bytes());
    check(b);
}

#[test]
fn pcapng_no_interfaces() {
    let f = [shb(E::Be), block(E::Be, 5, &[0; 8])].concat();
    let (fmt, frames) = ok(&f);
    assert_eq!(fmt, "pcapng-be");
    assert!(frames.is_empty());
}

// ---- ERF -------------------------------------------------------------------------------------

fn erf_file() -> (Vec<u8>, Vec<usize>) {
    let mut f = Vec::new();
    let mut starts = Vec::new();
    let ts = (1_600_000_000u64 << 32) | (1 << 31); // .5 s
    let recs = [
        erf_record(ts, 2, 0, &[0xaa; 64], 60),     // Ethernet, padded beyond wlen
        erf_record(ts + 1, 2, 2, &[0xbb; 40], 40), // two extension headers
        erf_record(ts + 2, 22, 0, &[0x45; 20], 20),
        erf_record(0, 48, 0, &[0; 8], 0), // PAD: skipped
        erf_record(ts + 3, 23, 1, &[0x60; 40], 40),
        erf_record(ts + 4, 27, 0, &[1; 16], 0), // META: reported as LINKTYPE_ERF
    ];
    for r in recs {
        starts.push(f.len());
        f.extend(r);
    }
    starts.push(f.len());
    (f, starts)
}

#[test]
fn erf_records() {
    let (f, _) = erf_file();
    let (fmt, frames) = ok(&f);
    assert_eq!(fmt, "erf");
    let summary: Vec<(u32, u32, usize)> = frames.iter().map(|g| (g.1, g.2, g.3.len())).collect();
    assert_eq!(summary, vec![(60, 1, 60), (40, 1, 40), (20, 228, 20), (40, 229, 40), (32, 197, 32)]);
    assert_eq!(frames[0].0, 1_600_000_000_500_000_000);
    assert_eq!(frames[1].3, vec![0xbb; 40]);
}

#[test]
fn erf_truncation_points() {
    let (f, starts) = erf_file();
    let records = |n: usize| starts.iter().skip(1).filter(|&&s| s <= n).count();
    for n in 1..f.len() {
        let cut = &f[..n];
        if n < starts[1] {
            // No magic: an incomplete first record cannot be told from random bytes.
            assert!(read(cut).is_err(), "cut at {n}");
            continue;
        }
        let (_, frames, err) = read(cut).expect("open");
        // The PAD record (index 3) yields no frame.
        let complete = records(n);
        let want = complete - usize::from(complete > 3);
        assert_eq!(frames.len(), want, "cut at {n}");
        if starts.contains(&n) {
            assert!(err.is_none());
        } else {
            let err = err.expect("truncated");
            assert!(matches!(err.kind, CaptureErrorKind::Truncated));
            assert_eq!(err.offset as usize, starts[complete]);
        }
    }
}

#[test]
fn erf_corrupt_record() {
    let (mut f, starts) = erf_file();
    // rlen below the header size on the third record.
    f[starts[2] + 10..starts[2] + 12].copy_from_slice(&8u16.to_be_bytes());
    let (_, frames, err) = read(&f).expect("open");
    assert_eq!(frames.len(), 2);
    let err = err.expect("corrupt");
    assert!(matches!(err.kind, CaptureErrorKind::Corrupt(_)));
    assert_eq!(err.offset as usize, starts[2]);
}

// ---- other inputs ----------------------------------------------------------------------------

#[test]
fn snoop_file() {
    let mut f = b"snoop\0\0\0".to_vec();
    f.extend(2u32.to_be_bytes());
    f.extend(4u32.to_be_bytes());
    for len in [5u32, 8] {
        let rec_len = 24 + len.div_ceil(4) * 4;
        for v in [len + 4, len, rec_len, 0, 100, 250_000] {
            f.extend(v.to_be_bytes());
        }
        f.extend(vec![1u8; (rec_len - 24) as usize]);
    }
    let (fmt, frames) = ok(&f);
    assert_eq!(fmt, "snoop");
    assert_eq!(frames.len(), 2);
    assert_eq!((frames[0].0, frames[0].1, frames[0].2, frames[0].3.len()), (100_250_000_000, 9, 1, 5));
}

#[test]
fn not_captures() {
    for text in [&b"Hello, world! This is a text file, not a capture.\n"[..], b"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n"] {
        let err = read(text).expect_err("not a capture");
        assert!(matches!(err.kind, CaptureErrorKind::NotACapture { .. }), "{err}");
    }
    let err = read(&[0u8; 40]).expect_err("zeros");
    assert!(matches!(err.kind, CaptureErrorKind::NotACapture { magic: [0, 0, 0, 0] }));
    let err = read(b"").expect_err("empty");
    assert!(matches!(err.kind, CaptureErrorKind::Empty));
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(b).expect("gzip");
    z.finish().expect("gzip")
}

fn xz(b: &[u8]) -> Vec<u8> {
    let mut z = liblzma::write::XzEncoder::new(Vec::new(), 1);
    z.write_all(b).expect("xz");
    z.finish().expect("xz")
}

#[test]
fn compressed_inputs() {
    let (p, _) = pcap_file(E::Be, 0xa1b2_3c4d, false);
    let (n, _) = pcapng_file();
    let (r, _) = erf_file();
    for plain in [p, n, r] {
        let (fmt, want) = ok(&plain);
        let zst = zstd::encode_all(&plain[..], 1).expect("zstd");
        // Two gzip members back to back decode as one stream.
        let half = plain.len() / 2;
        let multi = [gzip(&plain[..half]), gzip(&plain[half..])].concat();
        for (name, packed) in [("gzip", gzip(&plain)), ("gzip", multi), ("zstd", zst), ("xz", xz(&plain))] {
            let mut src = open_bytes(packed.clone()).expect("open compressed");
            assert_eq!(src.format(), fmt);
            assert_eq!(src.compression(), Some(name));
            let (got, err) = drain(src.as_mut());
            assert!(err.is_none(), "{name}: {err:?}");
            assert_eq!(got, want, "{name}");
            // A cut compressed stream: some complete frames, then an error, never a panic.
            let cut = &packed[..packed.len() * 2 / 3];
            if let Ok(mut src) = open_bytes(cut.to_vec()) {
                let (got, err) = drain(src.as_mut());
                assert!(got.len() < want.len());
                assert!(err.is_some(), "{name}: cut stream ended cleanly");
            }
        }
    }
}

#[test]
fn compressed_garbage() {
    let mut g = gzip(b"not a capture at all, just some text\n");
    let err = read(&g).expect_err("text inside gzip");
    assert!(matches!(err.kind, CaptureErrorKind::NotACapture { .. }));
    // Damage the deflate data.
    let n = g.len();
    g[10..n - 8].iter_mut().for_each(|b| *b = 0xff);
    assert!(read(&g).is_err());
}

#[test]
fn open_paths() {
    let dir = std::env::temp_dir().join(format!("sonde-capture-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let (plain, _) = pcap_file(E::Le, 0xa1b2_c3d4, false);
    // Content decides, not the name.
    let p = dir.join("trace.erf");
    std::fs::write(&p, &plain).expect("write");
    let mut src = crate::open(&p).expect("open");
    assert_eq!(src.format(), "pcap-le-usec");
    assert_eq!(src.size_hint(), Some(plain.len() as u64));
    assert_eq!(drain(src.as_mut()).0.len(), 3);
    let z = dir.join("trace.pcap");
    std::fs::write(&z, gzip(&plain)).expect("write");
    let mut src = crate::open(&z).expect("open gz");
    assert_eq!(src.compression(), Some("gzip"));
    assert_eq!(drain(src.as_mut()).0.len(), 3);
    let e = dir.join("empty");
    std::fs::write(&e, b"").expect("write");
    assert!(matches!(crate::open(&e).err().map(|e| e.kind), Some(CaptureErrorKind::Empty)));
    let missing = crate::open(&dir.join("missing")).err().expect("missing file");
    assert!(matches!(missing.kind, CaptureErrorKind::Io(_)));
    std::fs::remove_dir_all(&dir).ok();
}

/// Random damage (byte flips, cuts, length fields set to extremes) never panics, never loops,
/// and the slice and stream paths keep agreeing (checked inside `read`).
#[test]
fn mutations_never_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let snoop = {
        let mut f = b"snoop\0\0\0".to_vec();
        f.extend(2u32.to_be_bytes());
        f.extend(4u32.to_be_bytes());
        for v in [9u32, 5, 32, 0, 100, 0] {
            f.extend(v.to_be_bytes());
        }
        f.extend([1u8; 8]);
        f
    };
    let seeds = [pcap_file(E::Le, 0xa1b2_cd34, true).0, pcapng_file().0, erf_file().0, snoop];
    for base in &seeds {
        for _ in 0..400 {
            let mut f = base.clone();
            for _ in 0..1 + rnd(4) {
                let i = rnd(f.len());
                match rnd(3) {
                    0 => f[i] = rnd(256) as u8,
                    1 => f[i] = 0xff,
                    _ => f[i] = 0,
                }
            }
            if rnd(4) == 0 {
                f.truncate(rnd(f.len()));
            }
            if let Ok((_, frames, _)) = read(&f) {
                // Every record takes at least 12 bytes.
                assert!(frames.len() <= f.len() / 12);
            }
        }
    }
}

/// Each of several readers of a file gets what one reader gets, frames and error alike, when
/// the file is plain (each maps it) and compressed (decompressed once, handed to every reader).
#[test]
fn several_readers_of_a_file_each_read_it_whole() {
    let dir = std::env::temp_dir().join(format!("sonde-capture-readers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (plain, _) = pcap_file(E::Le, 0xa1b2_c3d4, false);
    let zst = zstd::encode_all(&plain[..], 1).expect("zstd");
    let gz = gzip(&plain);
    let cut = gz[..gz.len() * 2 / 3].to_vec();
    for (name, bytes) in [("plain", plain.clone()), ("gzip", gz), ("zstd", zst), ("cut", cut)] {
        let path = dir.join(name);
        std::fs::write(&path, &bytes).expect("write");
        let mut one = crate::open(&path).expect("open");
        let (want, want_err) = drain(one.as_mut());
        assert!(!want.is_empty(), "{name}");
        let readers = crate::open_readers(&path, 3).expect("open readers");
        assert_eq!(readers.len(), 3);
        for mut r in readers {
            assert_eq!((r.format(), r.compression()), (one.format(), one.compression()), "{name}");
            let (got, err) = drain(r.as_mut());
            assert_eq!(got, want, "{name}");
            assert_eq!(err_sig(&err), err_sig(&want_err), "{name}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
