//! sonde-capture: packet sources, the bottom of the pipeline.
//!
//! Opens a trace (pcap in both byte orders with µs/ns resolution and the modified/Kuznetsov
//! variant, pcapng with several interfaces, ERF), compressed or not (gzip, zstd, xz, detected by
//! content), from a file or standard input, and yields [`Frame`]s: timestamp, captured and
//! original length, link type and a borrowed view of the bytes. Uncompressed files are
//! memory-mapped; streams are read through one reusable buffer, so steady-state reading does not
//! allocate. A damaged file yields every frame before the damage, then reports where it stopped.

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
}

/// Why a source could not be opened, or stopped early. `kind` tells the caller whether the
/// frames already read are trustworthy (they always are: errors end the input, they never
/// corrupt what came before).
#[derive(Debug)]
pub struct CaptureError {
    pub kind: CaptureErrorKind,
    /// Byte offset in the (decompressed) stream where the problem was found.
    pub offset: u64,
}

#[derive(Debug)]
pub enum CaptureErrorKind {
    /// Opening or reading failed at the OS level.
    Io(std::io::Error),
    /// The input is not a capture file of a known format (first bytes given).
    NotACapture { magic: [u8; 4] },
    /// A known format in a version or variant sonde cannot read.
    Unsupported(&'static str),
    /// The input ended inside a record: everything before `offset` was read.
    Truncated,
    /// A record or block is inconsistent (bad length, bad block type, …).
    Corrupt(&'static str),
    /// The decompressor reported damaged compressed data.
    Decompress(String),
}

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            CaptureErrorKind::Io(e) => write!(f, "{e}"),
            CaptureErrorKind::NotACapture { magic } => write!(
                f,
                "not a capture file (pcap, pcapng or ERF); first bytes {:02x}{:02x}{:02x}{:02x}",
                magic[0], magic[1], magic[2], magic[3]
            ),
            CaptureErrorKind::Unsupported(what) => write!(f, "unsupported format: {what}"),
            CaptureErrorKind::Truncated => {
                write!(f, "file truncated: input ends inside a record at byte {}", self.offset)
            }
            CaptureErrorKind::Corrupt(what) => write!(f, "corrupt at byte {}: {what}", self.offset),
            CaptureErrorKind::Decompress(what) => {
                write!(f, "damaged compressed data near byte {}: {what}", self.offset)
            }
        }
    }
}

impl std::error::Error for CaptureError {}
