//! Byte providers under the format parsers: a memory map (or any in-memory buffer) that is
//! sliced without copying, and a stream read through one reusable, growable buffer.
//!
//! Parsers use them in two steps: `fill(n)` makes at least `n` bytes visible at the current
//! position (fewer only at the end of input), `consume(n)` moves past them. The slice returned
//! by `fill` is what a [`Frame`](crate::Frame) borrows.

use std::io::{self, Read};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{CaptureError, CaptureErrorKind};

/// Largest record or block any parser accepts (a guard against corrupt length fields: a stream
/// buffer is grown to hold one record, and nothing legitimate comes close to this).
pub(crate) const MAX_RECORD: usize = 256 << 20;

/// Initial capacity of a stream buffer; grown only for a record larger than it.
const STREAM_BUF: usize = 256 << 10;

/// Source of bytes for a parser.
pub(crate) trait Input {
    /// The bytes from the current position: at least `n` of them, unless the input ends first
    /// (then all that is left, possibly none).
    fn fill(&mut self, n: usize) -> Result<&[u8], CaptureError>;
    /// The `n`-byte header of the next record, `None` at a clean end of input (no byte left), or
    /// `Truncated` at `at` when the input ends inside the header.
    fn fill_header(&mut self, n: usize, at: u64) -> Result<Option<&[u8]>, CaptureError> {
        let h = self.fill(n)?;
        if h.is_empty() {
            return Ok(None);
        }
        if h.len() < n {
            return Err(crate::error::truncated(at));
        }
        Ok(Some(&h[..n]))
    }
    /// Exactly `n` bytes from the current position, or `Truncated` at `at` (where the record
    /// being read starts) when the input ends first.
    fn fill_exact(&mut self, n: usize, at: u64) -> Result<&[u8], CaptureError> {
        let b = self.fill(n)?;
        if b.len() < n {
            return Err(crate::error::truncated(at));
        }
        Ok(&b[..n])
    }
    /// Moves the position `n` bytes forward (`n` no more than the last `fill` returned).
    fn consume(&mut self, n: usize);
    /// Offset of the current position from the start of the (decompressed) input.
    fn position(&self) -> u64;
    /// Total size, when known without reading.
    fn size_hint(&self) -> Option<u64>;
    /// Name of the decompressor in front of the input, if any.
    fn compression(&self) -> Option<&'static str>;
}

/// A whole input held in memory: a memory map of a regular file, or a buffer (tests, `open_bytes`).
pub(crate) struct SliceInput<B> {
    data: B,
    pos: usize,
    /// Where the bytes already read were last handed back ([`Backing::release`]).
    released: usize,
}

/// What a [`SliceInput`] reads: bytes, and a way to let go of those already read.
pub(crate) trait Backing: AsRef<[u8]> {
    /// The bytes of `range` (read already) will not be read again.
    fn release(&self, _range: std::ops::Range<usize>) {}
}

/// A buffer in memory: nothing to let go of.
pub(crate) struct Held<B>(pub(crate) B);

impl<B: AsRef<[u8]>> AsRef<[u8]> for Held<B> {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref()
    }
}

impl<B: AsRef<[u8]>> Backing for Held<B> {}

/// A file mapped for reading. The pages read stay in the page cache but leave the process's
/// resident memory as the reader moves on: a run's peak RSS is its own state, not the trace's
/// size (a 2 GB trace would otherwise count 2 GB).
pub(crate) struct Mapped(pub(crate) memmap2::Mmap);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Backing for Mapped {
    fn release(&self, range: std::ops::Range<usize>) {
        Mapped::release_map(&self.0, range);
    }
}

impl Mapped {
    fn release_map(map: &memmap2::Mmap, range: std::ops::Range<usize>) {
        #[cfg(unix)]
        // SAFETY: the map is shared and read-only: dropping its pages loses nothing (a later
        // read of them faults them in again from the file), and no reference into them is
        // invalidated.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len()) };
        #[cfg(not(unix))]
        let _ = (map, range);
    }
}

/// One map of a file that several readers read whole (readers that split the flows): each
/// page is faulted in once for all of them, and let go once the slowest has read past it.
pub(crate) struct SharedMapped {
    shared: std::sync::Arc<SharedMap>,
    reader: usize,
}

struct SharedMap {
    map: memmap2::Mmap,
    /// How far each reader has let go (`usize::MAX` once it is dropped: it reads no more).
    passed: Box<[AtomicUsize]>,
    /// Let go up to here.
    released: AtomicUsize,
}

impl SharedMapped {
    /// `readers` readers of `map`.
    pub(crate) fn split(map: memmap2::Mmap, readers: usize) -> Vec<SharedMapped> {
        let passed = (0..readers).map(|_| AtomicUsize::new(0)).collect();
        let shared = std::sync::Arc::new(SharedMap { map, passed, released: AtomicUsize::new(0) });
        (0..readers).map(|reader| SharedMapped { shared: shared.clone(), reader }).collect()
    }

    /// Lets go of the pages every reader has passed.
    fn release_passed(&self) {
        let s = &*self.shared;
        let slowest = s.passed.iter().map(|p| p.load(Ordering::Acquire)).min().unwrap_or(0).min(s.map.len());
        // Whoever moves `released` forward lets go of what it moved over: each page once.
        let from = s.released.fetch_max(slowest, Ordering::AcqRel);
        if slowest > from {
            Mapped::release_map(&s.map, from..slowest);
        }
    }
}

impl AsRef<[u8]> for SharedMapped {
    fn as_ref(&self) -> &[u8] {
        &self.shared.map
    }
}

impl Backing for SharedMapped {
    fn release(&self, range: std::ops::Range<usize>) {
        self.shared.passed[self.reader].store(range.end, Ordering::Release);
        self.release_passed();
    }
}

impl Drop for SharedMapped {
    fn drop(&mut self) {
        // A reader that stopped holds no page back from the others.
        self.shared.passed[self.reader].store(usize::MAX, Ordering::Release);
        let s = &*self.shared;
        if s.passed.iter().any(|p| p.load(Ordering::Acquire) != usize::MAX) {
            self.release_passed();
        }
    }
}

/// Bytes read between two releases of a mapped input.
const RELEASE_EVERY: usize = 1 << 20;

impl<B: Backing> SliceInput<B> {
    pub(crate) fn new(data: B) -> Self {
        SliceInput { data, pos: 0, released: 0 }
    }
}

impl<B: Backing> Input for SliceInput<B> {
    #[inline]
    fn fill(&mut self, _n: usize) -> Result<&[u8], CaptureError> {
        // Everything is already there: hand out the rest of the map.
        Ok(self.data.as_ref().get(self.pos..).unwrap_or(&[]))
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        let data = self.data.as_ref();
        self.pos = self.pos.saturating_add(n).min(data.len());
        prefetch(data, self.pos.saturating_add(PREFETCH_AHEAD));
        if self.pos - self.released >= RELEASE_EVERY {
            // Whole pages only, the one being read kept.
            let upto = self.pos & !(PAGE - 1);
            self.data.release(self.released..upto);
            self.released = upto;
        }
    }

    fn position(&self) -> u64 {
        self.pos as u64
    }

    fn size_hint(&self) -> Option<u64> {
        Some(self.data.as_ref().len() as u64)
    }

    fn compression(&self) -> Option<&'static str> {
        None
    }
}

/// How far ahead of the read position a [`SliceInput`] asks the CPU to fetch. Reading a mapped
/// file is a sequential stream the hardware prefetcher follows only within a 4 KiB page; a hint
/// two pages ahead cut the CPU time of reading and decoding bench.pcap by about 12 %.
const PREFETCH_AHEAD: usize = 8 << 10;

/// A multiple of the page size of every platform sonde runs on (madvise takes page-aligned
/// lengths from the map's start).
const PAGE: usize = 64 << 10;

/// Hints the CPU to fetch the cache line holding `b[at]` (nothing if `at` is out of bounds).
#[inline(always)]
fn prefetch(b: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = b.get(at) {
        // SAFETY: `p` points into `b`, and a prefetch only loads a cache line: it neither reads
        // into a register nor faults. (The intrinsic is `unsafe` only for taking a raw pointer.)
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((p as *const u8).cast()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, at);
}

/// A stream (pipe, decompressor) read through one buffer. The buffer grows only when a record
/// does not fit; otherwise steady-state reading allocates nothing.
pub(crate) struct StreamInput<R> {
    inner: R,
    buf: Vec<u8>,
    /// Visible bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Stream offset of `buf[start]`.
    pos: u64,
    eof: bool,
    compression: Option<&'static str>,
}

impl<R: Read> StreamInput<R> {
    pub(crate) fn new(inner: R, compression: Option<&'static str>) -> Self {
        StreamInput { inner, buf: vec![0; STREAM_BUF], start: 0, end: 0, pos: 0, eof: false, compression }
    }

    #[cold]
    fn read_error(&self, e: io::Error) -> CaptureError {
        let offset = self.pos + (self.end - self.start) as u64;
        // A decompressor reports damaged data as InvalidData/InvalidInput/Other (or an early
        // end of its stream); only the OS can produce the rest.
        let kind = match (self.compression, e.kind()) {
            (Some(c), io::ErrorKind::InvalidData)
            | (Some(c), io::ErrorKind::InvalidInput)
            | (Some(c), io::ErrorKind::Other)
            | (Some(c), io::ErrorKind::UnexpectedEof) => CaptureErrorKind::Decompress(format!("{c}: {e}")),
            _ => CaptureErrorKind::Io(e),
        };
        CaptureError { kind, offset }
    }

    /// Slow path of `fill`: make room, then read until `n` bytes are visible or the input ends.
    #[inline(never)]
    fn refill(&mut self, n: usize) -> Result<(), CaptureError> {
        // Parsers check lengths against MAX_RECORD first; this only bounds the allocation.
        let n = n.min(MAX_RECORD + 64);
        if self.buf.len() - self.start < n && self.start > 0 {
            // Move the partial record to the front.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while !self.eof && self.end - self.start < n {
            if self.end == self.buf.len() {
                // Grow by doubling as bytes arrive, so a corrupt length field costs at most
                // twice the bytes really there, not what the field claims.
                let want = self.buf.len().saturating_mul(2).min(n).max(self.buf.len() + 1);
                self.buf.resize(want, 0);
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.eof = true;
                    return Err(self.read_error(e));
                }
            }
        }
        Ok(())
    }
}

impl<R: Read> Input for StreamInput<R> {
    #[inline]
    fn fill(&mut self, n: usize) -> Result<&[u8], CaptureError> {
        if self.end - self.start < n && !self.eof {
            self.refill(n)?;
        }
        Ok(&self.buf[self.start..self.end])
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.pos += n as u64;
    }

    fn position(&self) -> u64 {
        self.pos
    }

    fn size_hint(&self) -> Option<u64> {
        None
    }

    fn compression(&self) -> Option<&'static str> {
        self.compression
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Readers of one map: a page goes once every reader has passed it; a reader dropped
    /// (stopped) holds nothing back.
    #[test]
    fn a_shared_map_lets_go_of_what_every_reader_has_passed() {
        let path = std::env::temp_dir().join(format!("sonde-shared-map-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 4 << 20]).unwrap();
        // SAFETY: a file this test made, not written while mapped.
        let map = unsafe { memmap2::Mmap::map(&std::fs::File::open(&path).unwrap()) }.unwrap();
        std::fs::remove_file(&path).ok();
        let mut readers = SharedMapped::split(map, 3);
        let released = |r: &SharedMapped| r.shared.released.load(Ordering::Acquire);
        let mb = 1 << 20;
        readers[0].release(0..2 * mb);
        readers[1].release(0..mb);
        assert_eq!(released(&readers[0]), 0, "reader 2 has passed nothing");
        readers[2].release(0..3 * mb);
        assert_eq!(released(&readers[0]), mb, "the slowest, reader 1, is at 1 MiB");
        readers[1].release(mb..3 * mb);
        assert_eq!(released(&readers[0]), 2 * mb);
        drop(readers.remove(0));
        assert_eq!(released(&readers[0]), 3 * mb, "reader 0 stopped: the others are at 3 MiB");
        assert!(readers.iter().all(|r| r.as_ref().len() == 4 << 20 && r.as_ref()[4 * mb - 1] == 7));
    }

    /// A reader that returns at most `chunk` bytes per call, to exercise refills.
    pub(crate) struct Trickle {
        pub data: Vec<u8>,
        pub pos: usize,
        pub chunk: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.chunk).min(self.data.len() - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn stream_refill_and_grow() {
        let data: Vec<u8> = (0..(STREAM_BUF * 3)).map(|i| i as u8).collect();
        let mut s = StreamInput::new(Trickle { data: data.clone(), pos: 0, chunk: 7 }, None);
        assert_eq!(&s.fill(10).unwrap()[..10], &data[..10]);
        s.consume(5);
        // A request bigger than the buffer grows it and keeps the bytes in order.
        let big = STREAM_BUF * 2;
        let got = s.fill(big).unwrap();
        assert!(got.len() >= big);
        assert_eq!(&got[..big], &data[5..5 + big]);
        s.consume(big);
        assert_eq!(s.position(), (5 + big) as u64);
        let rest = s.fill(STREAM_BUF * 4).unwrap().len();
        assert_eq!(rest, data.len() - 5 - big);
        s.consume(rest);
        assert!(s.fill(1).unwrap().is_empty());
    }

    #[test]
    fn corrupt_length_does_not_allocate_what_it_claims() {
        let mut s = StreamInput::new(Trickle { data: vec![7; 1000], pos: 0, chunk: 100 }, None);
        assert_eq!(s.fill(200 << 20).unwrap().len(), 1000);
        assert_eq!(s.buf.len(), STREAM_BUF);
        let data = vec![7; STREAM_BUF * 3];
        let mut s = StreamInput::new(Trickle { data, pos: 0, chunk: 1 << 20 }, None);
        assert_eq!(s.fill(200 << 20).unwrap().len(), STREAM_BUF * 3);
        assert!(s.buf.len() <= STREAM_BUF * 4);
    }

    #[test]
    fn slice_input() {
        let mut s = SliceInput::new(Held(vec![1u8, 2, 3]));
        assert_eq!(s.fill(100).unwrap(), &[1, 2, 3]);
        s.consume(2);
        assert_eq!(s.fill(1).unwrap(), &[3]);
        s.consume(10);
        assert!(s.fill(1).unwrap().is_empty());
        assert_eq!(s.position(), 3);
    }
}
