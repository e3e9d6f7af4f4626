//! sonde-capture: packet sources, the bottom of the pipeline.
//!
//! Opens a trace (pcap in both byte orders with µs/ns resolution and the modified/Kuznetsov
//! variant, pcapng with several interfaces, ERF), compressed or not (gzip, zstd, xz, detected by
//! content), from a file or standard input, and yields [`Frame`]s: timestamp, captured and
//! original length, link type and a borrowed view of the bytes. Uncompressed files are
//! memory-mapped; streams are read through one reusable buffer, so steady-state reading does not
//! allocate. A damaged file yields every frame before the damage, then reports where it stopped.
//! Sun snoop files are read too (Ethernet, FDDI and SunATM datalinks). [`TraceWriter`] writes
//! frames back out as pcap or pcapng, for the commands that rewrite traces.
//!
//! Entry points: [`open`] (a path, `-` for standard input), [`open_stdin`], [`open_reader`]
//! (any byte stream), [`open_bytes`] (a buffer in memory) and [`open_readers`] (a file for
//! several readers, decompressed once). Each returns a boxed
//! [`PacketSource`]; the concrete readers are generic over their byte provider, so the
//! memory-mapped path is a bounds check and a slice per frame.
//!
//! Choices where the formats leave room:
//! - pcap: the link type is masked with libpcap's LT_LINKTYPE (0x03FFFFFF: the upper bits hold
//!   the FCS length); any version number is read with the 2.4 record layout, and before 2.3 a
//!   record whose incl_len exceeds orig_len has them swapped back (Wireshark's rule).
//! - pcapng: a packet block naming an interface its section never declared ends the input with
//!   `Corrupt` (as Wireshark does); SHB versions and options are not checked, IDB options only
//!   for if_tsresol and if_tsoffset; SPB frames have no timestamp (0).
//! - ERF: Ethernet types map to LINKTYPE_ETHERNET, IPv4/IPv6 types to 228/229; any other record
//!   type is yielded whole (header included) as [`LINKTYPE_ERF`]; PAD records are skipped.
//! - Timestamps saturate at 0 and `u64::MAX` ns (year 2554) instead of wrapping.
//! - A record claiming more than 256 MiB is `Corrupt`; a stream buffer grows only as bytes
//!   arrive, so a corrupt length never allocates what it claims.

use std::fs::File;
use std::io::{Cursor, Read};
use std::path::Path;

mod detect;
mod endian;
mod erf;
mod error;
mod pcap;
mod pcapng;
mod snoop;
mod stream;
mod tee;
#[cfg(test)]
mod tests;
mod timestamp;
mod write;

pub use detect::BoxedSource;
use detect::{capture, compression, decoder, decompressed, MAGIC_PEEK};
use error::io_error;
pub use error::{CaptureError, CaptureErrorKind};
use stream::{Held, Mapped, SharedMapped, SliceInput, StreamInput};
pub use timestamp::TIME_LIMIT_NS;
pub use write::{TraceFormat, TraceWriter, WriteError};

/// LINKTYPE_ETHERNET: IEEE 802.3 Ethernet.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// LINKTYPE_ERF: a whole ERF record; used for ERF record types with no LINKTYPE_ equivalent.
pub const LINKTYPE_ERF: u32 = 197;
/// LINKTYPE_IPV4: a raw IPv4 packet.
pub const LINKTYPE_IPV4: u32 = 228;
/// LINKTYPE_IPV6: a raw IPv6 packet.
pub const LINKTYPE_IPV6: u32 = 229;

/// One captured frame, borrowed from the source until the next call to `next_frame`.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Capture time in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Length on the wire (may exceed `data.len()` when the snaplen cut the frame).
    pub wire_len: u32,
    /// LINKTYPE_ value of the interface the frame was captured on.
    pub link_type: u32,
    pub data: &'a [u8],
}

/// A source of frames. A lending iterator: the frame borrows the source.
pub trait PacketSource {
    /// The next frame, `Ok(None)` at a clean end of input, or an error that ends the input
    /// (truncation, corruption). After an error, the source yields `Ok(None)`.
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError>;
    /// Bytes consumed so far (of the decompressed stream), for progress and error positions.
    fn position(&self) -> u64;
    /// Size of the input if known (uncompressed file on disk), for a progress bar.
    fn size_hint(&self) -> Option<u64>;
    /// Format name: "pcap", "pcapng", "erf", with the variant ("pcap-le-usec", …).
    fn format(&self) -> &str;
    /// Decompressor the input was read through ("gzip", "zstd", "xz"), if any.
    fn compression(&self) -> Option<&str> {
        None
    }
    /// Asked after `next_frame` returned `Ok(None)`: `Some(now_ns)` from a live source that had
    /// no frame to give for now, and reading goes on. Packet time has reached `now_ns` (ns since
    /// the Unix epoch), so timers that are due may fire: a live source pauses like this when no
    /// frame came for a while (a quiet link must still close intervals and time flows out) and
    /// now and then between frames (so that every worker hears the time, not only those that
    /// get packets); frames read later should not be older. `None`: the input ended, which is
    /// all a file ever says (there the frames are the clock). A reader that keeps no timers may
    /// stop at the first `Ok(None)`. Asked only then, so reading a file costs nothing more.
    fn tick(&mut self) -> Option<u64> {
        None
    }
}

/// Opens a capture file, detecting compression and format by content; `-` is standard input.
/// Uncompressed regular files are memory-mapped; everything else is read as a stream.
pub fn open(path: &Path) -> Result<BoxedSource, CaptureError> {
    if path.as_os_str() == "-" {
        return open_stdin();
    }
    let file = File::open(path).map_err(|e| io_error(e, 0))?;
    let meta = file.metadata().map_err(|e| io_error(e, 0))?;
    if !meta.is_file() {
        // FIFO, character device, process substitution: no map possible.
        return open_reader(file);
    }
    if meta.len() == 0 {
        return Err(detect::not_a_capture(&[]));
    }
    let Some(map) = map_to_read(&file) else { return open_reader(file) };
    if let Some(c) = compression(&map[..]) {
        drop(map);
        // The map never moved the file offset: the decoder reads from byte 0.
        return decompressed(c, file);
    }
    capture(SliceInput::new(Mapped(map)))
}

/// `n` sources of the capture file at `path`, each giving every frame, for `n` readers that
/// split the flows between them. An uncompressed regular file is mapped once for all (each page
/// faulted in once, and let go when the slowest reader has passed it); anything else
/// (compressed, a pipe) is read and decompressed once, on a thread of its own, and its bytes
/// handed to every source.
pub fn open_readers(path: &Path, n: usize) -> Result<Vec<BoxedSource>, CaptureError> {
    let mut file = File::open(path).map_err(|e| io_error(e, 0))?;
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    let mut head = [0u8; MAGIC_PEEK];
    let got = read_head(&mut file, &mut head)?;
    let c = compression(&head[..got]);
    if regular && c.is_none() && got > 0 {
        return match map_to_read(&file) {
            Some(map) => SharedMapped::split(map, n).into_iter().map(|m| capture(SliceInput::new(m))).collect(),
            None => (0..n).map(|_| open(path)).collect(),
        };
    }
    let raw = Cursor::new(head[..got].to_vec()).chain(file);
    let (stream, name): (Box<dyn Read + Send>, _) = match c {
        Some(c) => {
            let (d, name) = decoder(c, raw)?;
            (d, Some(name))
        }
        None => (Box::new(raw), None),
    };
    tee::tee(stream, n).map_err(|e| io_error(e, 0))?.into_iter().map(|r| capture(StreamInput::new(r, name))).collect()
}

/// A source that has ended, standing in for `source` (same position, format and compression):
/// put in place of a source its reader stops reading before the end (a signal), so that what
/// it held goes at once — a source of [`open_readers`] holds the others' next bytes back until
/// its reader takes them or lets go of it.
pub fn ended(source: &dyn PacketSource) -> BoxedSource {
    Box::new(Ended {
        position: source.position(),
        size: source.size_hint(),
        format: source.format().to_string(),
        compression: source.compression().map(str::to_string),
    })
}

struct Ended {
    position: u64,
    size: Option<u64>,
    format: String,
    compression: Option<String>,
}

impl PacketSource for Ended {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        Ok(None)
    }
    fn position(&self) -> u64 {
        self.position
    }
    fn size_hint(&self) -> Option<u64> {
        self.size
    }
    fn format(&self) -> &str {
        &self.format
    }
    fn compression(&self) -> Option<&str> {
        self.compression.as_deref()
    }
}

/// Reads up to `head.len()` bytes (fewer only at the end of `r`).
fn read_head(r: &mut impl Read, head: &mut [u8]) -> Result<usize, CaptureError> {
    let mut n = 0;
    while n < head.len() {
        match r.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e, n as u64)),
        }
    }
    Ok(n)
}

/// `file` mapped for reading from start to end, or `None` when it cannot be mapped.
fn map_to_read(file: &File) -> Option<memmap2::Mmap> {
    // SAFETY: the map is only read. Another process truncating or rewriting the file while it
    // is mapped could change bytes under us (or fault): the usual caveat of mapped reading,
    // accepted for capture files, which are not written while being analysed.
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(map)
}

/// Reads a capture from standard input (a stream: possibly compressed, never mapped).
pub fn open_stdin() -> Result<BoxedSource, CaptureError> {
    open_reader(std::io::stdin())
}

/// Reads a capture from any byte stream, detecting compression and format by content.
pub fn open_reader<R: Read + Send + 'static>(mut r: R) -> Result<BoxedSource, CaptureError> {
    // Peek at the first bytes for a compression magic, then put them back in front.
    let mut prefix = [0u8; MAGIC_PEEK];
    let n = read_head(&mut r, &mut prefix)?;
    let head = &prefix[..n];
    let chained = Cursor::new(head.to_vec()).chain(r);
    match compression(head) {
        Some(c) => decompressed(c, chained),
        None => capture(StreamInput::new(chained, None)),
    }
}

/// Reads a capture held in memory, without copying it (compressed data is streamed).
pub fn open_bytes<B: AsRef<[u8]> + Send + 'static>(data: B) -> Result<BoxedSource, CaptureError> {
    match compression(data.as_ref()) {
        Some(c) => decompressed(c, Cursor::new(data)),
        None => capture(SliceInput::new(Held(data))),
    }
}
