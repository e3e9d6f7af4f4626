//! Format detection by content (never by file name): compression magics first, then the
//! capture formats' magics, then the ERF record heuristic.

use std::io::Read;

use crate::erf::{looks_like_erf, ErfReader, DETECT_BYTES};
use crate::pcap::PcapReader;
use crate::pcapng::PcapngReader;
use crate::snoop::SnoopReader;
use crate::stream::{Input, StreamInput};
use crate::{CaptureError, CaptureErrorKind, PacketSource};

/// Boxed source as `open` returns it.
pub type BoxedSource = Box<dyn PacketSource + Send>;

/// A compression format recognised by its magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    Gzip,
    Zstd,
    Xz,
}

/// Longest compression magic (xz).
pub(crate) const MAGIC_PEEK: usize = 6;

pub(crate) fn compression(b: &[u8]) -> Option<Compression> {
    if b.starts_with(&[0x1f, 0x8b]) {
        Some(Compression::Gzip)
    } else if b.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(Compression::Zstd)
    } else if b.starts_with(&[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]) {
        Some(Compression::Xz)
    } else {
        None
    }
}

/// Wraps a stream in its decompressor and detects the capture format inside.
pub(crate) fn decompressed<R: Read + Send + 'static>(c: Compression, r: R) -> Result<BoxedSource, CaptureError> {
    let (inner, name) = decoder(c, r)?;
    capture(StreamInput::new(inner, Some(name)))
}

/// `r`'s decompressed bytes, and the decompressor's name.
pub(crate) fn decoder<R: Read + Send + 'static>(
    c: Compression,
    r: R,
) -> Result<(Box<dyn Read + Send>, &'static str), CaptureError> {
    Ok(match c {
        // Concatenated gzip members form one stream (gzip -c a >> b).
        Compression::Gzip => (Box::new(flate2::read::MultiGzDecoder::new(r)), "gzip"),
        Compression::Zstd => match zstd::stream::read::Decoder::new(r) {
            Ok(d) => (Box::new(d), "zstd"),
            Err(e) => return Err(CaptureError { kind: CaptureErrorKind::Io(e), offset: 0 }),
        },
        Compression::Xz => (Box::new(liblzma::read::XzDecoder::new_multi_decoder(r)), "xz"),
    })
}

#[cold]
pub(crate) fn not_a_capture(b: &[u8]) -> CaptureError {
    if b.is_empty() {
        return CaptureError { kind: CaptureErrorKind::Empty, offset: 0 };
    }
    let mut magic = [0u8; 4];
    let n = b.len().min(4);
    magic[..n].copy_from_slice(&b[..n]);
    CaptureError { kind: CaptureErrorKind::NotACapture { magic }, offset: 0 }
}

/// Detects the capture format at the start of `input` and builds its reader. Compression is
/// handled by the caller (it needs the raw reader).
pub(crate) fn capture<I: Input + Send + 'static>(mut input: I) -> Result<BoxedSource, CaptureError> {
    // Magics first: a pipe then delivers its first frame without waiting for more bytes.
    let b = input.fill(8)?;
    if crate::pcap::magic(b).is_some() {
        return Ok(Box::new(PcapReader::new(input)?));
    }
    if b.starts_with(&[0x0A, 0x0D, 0x0D, 0x0A]) {
        return Ok(Box::new(PcapngReader::new(input)?));
    }
    if b.starts_with(crate::snoop::MAGIC) {
        return Ok(Box::new(SnoopReader::new(input)?));
    }
    let b = input.fill(DETECT_BYTES)?;
    if looks_like_erf(b) {
        return Ok(Box::new(ErfReader::new(input)));
    }
    Err(not_a_capture(b))
}
