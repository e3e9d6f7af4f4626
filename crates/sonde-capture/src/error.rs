//! Why a source could not be opened or stopped early, and the constructors the readers use
//! (cold: the error path stays out of the record loops).

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
    /// The input holds no bytes at all (no header to recognise).
    Empty,
}

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            CaptureErrorKind::Io(e) => write!(f, "{e}"),
            CaptureErrorKind::NotACapture { magic } => write!(
                f,
                "not a capture file (pcap, pcapng, ERF or snoop); first bytes {:02x}{:02x}{:02x}{:02x}",
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
            CaptureErrorKind::Empty => write!(f, "empty input: not a capture file"),
        }
    }
}

impl std::error::Error for CaptureError {}

#[cold]
pub(crate) fn io_error(e: std::io::Error, offset: u64) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Io(e), offset }
}

#[cold]
pub(crate) fn truncated(offset: u64) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Truncated, offset }
}

#[cold]
pub(crate) fn corrupt(offset: u64, what: &'static str) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Corrupt(what), offset }
}

#[cold]
pub(crate) fn unsupported(offset: u64, what: &'static str) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Unsupported(what), offset }
}
