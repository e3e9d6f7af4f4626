//! Capture readers (pcap, pcapng, ERF, snoop; gzip, zstd, xz by content) over arbitrary bytes.
//!
//! The same bytes are read three times: from memory (`open_bytes`, the mapped-file path) and as a
//! stream (`open_reader`, standard input's path). Asserts: neither panics; both give the same
//! frames (time, lengths, link type, bytes) and agree on whether the input was a capture, and
//! so does a stream of short reads when the input is not compressed;
//! after an error a source gives no more frames; positions never go back.

use std::io::Read;

use sonde_capture::{open_bytes, open_reader, BoxedSource, CaptureErrorKind};

/// A decompression bomb can hold any number of frames: a cap keeps one run short.
const MAX_FRAMES: usize = 2_000;
const MAX_BYTES: usize = 16 << 20;

#[derive(Debug, PartialEq)]
struct Seen {
    frames: Vec<(u64, u32, u32, Vec<u8>)>,
    /// The error that ended the input, by kind only (a stream may notice it at another offset).
    error: Option<String>,
    capped: bool,
}

/// A reader that hands out a few bytes at a time, so the stream path meets every short read.
struct Dribble {
    bytes: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl Read for Dribble {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = &self.bytes[self.at..];
        let n = buf.len().min(rest.len()).min(self.chunk);
        buf[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

fn kind(k: &CaptureErrorKind) -> String {
    match k {
        CaptureErrorKind::Io(_) => "io".into(),
        CaptureErrorKind::NotACapture { .. } => "not-a-capture".into(),
        CaptureErrorKind::Unsupported(w) => format!("unsupported {w}"),
        CaptureErrorKind::Truncated => "truncated".into(),
        CaptureErrorKind::Corrupt(w) => format!("corrupt {w}"),
        CaptureErrorKind::Decompress(_) => "decompress".into(),
        CaptureErrorKind::Empty => "empty".into(),
    }
}

fn read_all(src: Result<BoxedSource, sonde_capture::CaptureError>) -> Seen {
    let mut seen = Seen { frames: Vec::new(), error: None, capped: false };
    let mut src = match src {
        Ok(s) => s,
        Err(e) => {
            seen.error = Some(format!("open: {}", kind(&e.kind)));
            return seen;
        }
    };
    let _ = (src.format().len(), src.compression(), src.size_hint());
    let (mut bytes, mut last_pos) = (0usize, 0u64);
    loop {
        match src.next_frame() {
            Ok(Some(f)) => {
                bytes += f.data.len();
                seen.frames.push((f.ts_ns, f.wire_len, f.link_type, f.data.to_vec()));
                if seen.frames.len() >= MAX_FRAMES || bytes >= MAX_BYTES {
                    seen.capped = true;
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                seen.error = Some(kind(&e.kind));
                assert!(src.next_frame().unwrap().is_none(), "a frame after an error");
                break;
            }
        }
        let pos = src.position();
        assert!(pos >= last_pos, "position went back: {last_pos} -> {pos}");
        last_pos = pos;
    }
    seen
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let mapped = read_all(open_bytes(data.to_vec()));
        let chunk = 1 + data.first().map_or(0, |&b| usize::from(b) % 61);
        let streamed = read_all(open_reader(std::io::Cursor::new(data.to_vec())));
        assert_eq!(mapped.frames.len(), streamed.frames.len(), "mapped and streamed frame counts");
        assert_eq!(mapped, streamed, "mapped and streamed reads differ");
        let dribbled = read_all(open_reader(Dribble { bytes: data.to_vec(), at: 0, chunk }));
        // A decompressor fed a few bytes at a time may hand out what it decoded before it meets
        // damage that, fed everything at once, it reports first (or garbage before the error):
        // both are allowed, so only uncompressed inputs must read the same in short reads.
        let compressed = [&[0x1f, 0x8b][..], &[0x28, 0xb5, 0x2f, 0xfd], &[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]]
            .iter()
            .any(|m| data.starts_with(m));
        if !compressed {
            assert_eq!(mapped, dribbled, "short reads change what is read (chunk {chunk})");
        }
    });
}
