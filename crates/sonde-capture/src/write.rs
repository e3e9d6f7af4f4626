//! Writing traces: classic pcap (µs or ns, little-endian) and pcapng, for the commands that
//! rewrite a trace for other tools (`sonde thin`, `sonde anon`).
//!
//! A pcap file holds one link type, named in its header; the header is written with the first
//! frame, so the writer takes the link type from the input. A frame of another link type is
//! refused ([`WriteError::MixedLinkTypes`]): inputs that can mix link types (pcapng, ERF) are
//! written as pcapng, which gives each link type an interface of its own
//! ([`TraceFormat::matching`]).
//!
//! References: draft-ietf-opsawg-pcap §4–5; draft-ietf-opsawg-pcapng §4.1 (SHB), §4.2 (IDB,
//! if_tsresol), §4.3 (EPB).

use std::io::{self, Write};

/// The snaplen written in headers: libpcap's MAXIMUM_SNAPLEN, so no reader cuts a frame.
const SNAPLEN: u32 = 262_144;

/// Which container to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// Classic pcap; `nanos` selects the nanosecond magic (0xa1b23c4d).
    Pcap { nanos: bool },
    /// pcapng, nanosecond timestamps, one interface per link type.
    Pcapng,
}

impl TraceFormat {
    /// The format that keeps what a source of format `source` (as [`crate::PacketSource::format`]
    /// names it) holds: pcap stays pcap at its resolution (the modified variant becomes plain
    /// µs pcap), anything else becomes pcapng.
    pub fn matching(source: &str) -> TraceFormat {
        if !source.starts_with("pcap-") {
            TraceFormat::Pcapng
        } else {
            TraceFormat::Pcap { nanos: source.ends_with("-nsec") }
        }
    }
}

/// Why a frame could not be written.
#[derive(Debug)]
pub enum WriteError {
    Io(io::Error),
    /// A pcap file holds one link type: `first` was written, `found` came later.
    MixedLinkTypes {
        first: u32,
        found: u32,
    },
    /// A frame longer than a record can say (4 GiB), or a pcapng link type above 65535.
    TooLarge,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Io(e) => write!(f, "{e}"),
            WriteError::MixedLinkTypes { first, found } => write!(
                f,
                "a pcap file holds one link type: {first} was written, then a frame of link type {found} came (write pcapng)"
            ),
            WriteError::TooLarge => write!(f, "frame or link type too large for the output format"),
        }
    }
}

impl std::error::Error for WriteError {}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// Writes frames to `out` in one [`TraceFormat`]. Buffer `out` (a `BufWriter`): every frame is
/// a few small writes. Call [`TraceWriter::finish`] to write the header of an empty trace and
/// flush.
pub struct TraceWriter<W: Write> {
    out: W,
    format: TraceFormat,
    /// pcap: the header's link type once written. pcapng: the link type of each interface
    /// declared so far, in interface order.
    link_types: Vec<u32>,
    frames: u64,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(out: W, format: TraceFormat) -> Self {
        TraceWriter { out, format, link_types: Vec::new(), frames: 0 }
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Writes one frame: its time, its length on the wire, its link type and the captured
    /// bytes (`data.len()` is the captured length).
    pub fn write(&mut self, ts_ns: u64, wire_len: u32, link_type: u32, data: &[u8]) -> Result<(), WriteError> {
        let caplen = u32::try_from(data.len()).map_err(|_| WriteError::TooLarge)?;
        // A record never claims fewer bytes on the wire than it holds.
        let wire_len = wire_len.max(caplen);
        match self.format {
            TraceFormat::Pcap { nanos } => {
                match self.link_types.first() {
                    None => self.pcap_header(link_type, nanos)?,
                    Some(&first) if first != link_type => {
                        return Err(WriteError::MixedLinkTypes { first, found: link_type })
                    }
                    Some(_) => {}
                }
                let secs = u32::try_from(ts_ns / 1_000_000_000).unwrap_or(u32::MAX);
                let frac = (ts_ns % 1_000_000_000) as u32;
                let frac = if nanos { frac } else { frac / 1000 };
                let mut rec = [0u8; 16];
                for (i, v) in [secs, frac, caplen, wire_len].into_iter().enumerate() {
                    rec[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
                }
                self.out.write_all(&rec)?;
                self.out.write_all(data)?;
            }
            TraceFormat::Pcapng => {
                let interface = self.pcapng_interface(link_type)?;
                let padded = data.len().next_multiple_of(4);
                let total = u32::try_from(32 + padded).map_err(|_| WriteError::TooLarge)?;
                let mut block = [0u8; 28];
                for (i, v) in
                    [6, total, interface, (ts_ns >> 32) as u32, ts_ns as u32, caplen, wire_len].into_iter().enumerate()
                {
                    block[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
                }
                self.out.write_all(&block)?;
                self.out.write_all(data)?;
                self.out.write_all(&[0u8; 3][..padded - data.len()])?;
                self.out.write_all(&total.to_le_bytes())?;
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// Writes the header if no frame did (an empty pcap says Ethernet), flushes, and returns
    /// the output.
    pub fn finish(mut self) -> Result<W, WriteError> {
        match self.format {
            TraceFormat::Pcap { nanos } if self.link_types.is_empty() => self.pcap_header(1, nanos)?,
            TraceFormat::Pcapng if self.link_types.is_empty() => self.section_header()?,
            _ => {}
        }
        self.out.flush()?;
        Ok(self.out)
    }

    fn pcap_header(&mut self, link_type: u32, nanos: bool) -> io::Result<()> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&magic.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&link_type.to_le_bytes());
        self.link_types.push(link_type);
        self.out.write_all(&h)
    }

    fn section_header(&mut self) -> io::Result<()> {
        let mut shb = [0u8; 28];
        shb[0..4].copy_from_slice(&0x0A0D_0D0Au32.to_le_bytes());
        shb[4..8].copy_from_slice(&28u32.to_le_bytes());
        shb[8..12].copy_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        shb[12..14].copy_from_slice(&1u16.to_le_bytes());
        // Section length unknown: -1.
        shb[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        shb[24..28].copy_from_slice(&28u32.to_le_bytes());
        self.out.write_all(&shb)
    }

    /// The interface for `link_type`, declared (with if_tsresol = 10⁻⁹) on first use.
    fn pcapng_interface(&mut self, link_type: u32) -> Result<u32, WriteError> {
        if let Some(i) = self.link_types.iter().position(|&l| l == link_type) {
            return Ok(i as u32);
        }
        if self.link_types.is_empty() {
            self.section_header()?;
        }
        let link16 = u16::try_from(link_type).map_err(|_| WriteError::TooLarge)?;
        let mut idb = [0u8; 32];
        idb[0..4].copy_from_slice(&1u32.to_le_bytes());
        idb[4..8].copy_from_slice(&32u32.to_le_bytes());
        idb[8..10].copy_from_slice(&link16.to_le_bytes());
        idb[12..16].copy_from_slice(&SNAPLEN.to_le_bytes());
        // if_tsresol (code 9, length 1): 9 = nanoseconds; then opt_endofopt.
        idb[16..20].copy_from_slice(&[9, 0, 1, 0]);
        idb[20] = 9;
        idb[28..32].copy_from_slice(&32u32.to_le_bytes());
        self.out.write_all(&idb)?;
        self.link_types.push(link_type);
        Ok(self.link_types.len() as u32 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Record = (u64, u32, u32, Vec<u8>);

    fn read_back(bytes: Vec<u8>) -> (String, Vec<Record>) {
        let mut source = crate::open_bytes(bytes).unwrap();
        let format = source.format().to_string();
        let mut frames = Vec::new();
        while let Some(f) = source.next_frame().unwrap() {
            frames.push((f.ts_ns, f.wire_len, f.link_type, f.data.to_vec()));
        }
        (format, frames)
    }

    fn frames() -> Vec<Record> {
        vec![
            (1_700_000_000_123_456_789, 60, 1, vec![0xaa; 60]),
            (1_700_000_001_000_000_001, 1514, 1, vec![1, 2, 3, 4, 5]),
            (1_700_000_002_999_999_999, 7, 1, vec![9; 7]),
        ]
    }

    fn write_all(format: TraceFormat, frames: &[Record]) -> Result<Vec<u8>, WriteError> {
        let mut w = TraceWriter::new(Vec::new(), format);
        for (ts, wire, link, data) in frames {
            w.write(*ts, *wire, *link, data)?;
        }
        assert_eq!(w.frames(), frames.len() as u64);
        w.finish()
    }

    #[test]
    fn pcap_nanos_round_trips_exactly() {
        let (format, back) = read_back(write_all(TraceFormat::Pcap { nanos: true }, &frames()).unwrap());
        assert_eq!(format, "pcap-le-nsec");
        assert_eq!(back, frames());
    }

    #[test]
    fn pcap_micros_round_trips_to_the_microsecond() {
        let (format, back) = read_back(write_all(TraceFormat::Pcap { nanos: false }, &frames()).unwrap());
        assert_eq!(format, "pcap-le-usec");
        let expected: Vec<Record> = frames().into_iter().map(|(ts, w, l, d)| (ts / 1000 * 1000, w, l, d)).collect();
        assert_eq!(back, expected);
    }

    #[test]
    fn pcapng_round_trips_several_link_types() {
        let mut mixed = frames();
        mixed[1].2 = 101;
        mixed.push((1_700_000_003_000_000_000, 4, 1, vec![1, 2, 3, 4]));
        let (format, back) = read_back(write_all(TraceFormat::Pcapng, &mixed).unwrap());
        assert_eq!(format, "pcapng-le");
        assert_eq!(back, mixed);
    }

    #[test]
    fn pcap_refuses_a_second_link_type() {
        let mut mixed = frames();
        mixed[2].2 = 113;
        let err = write_all(TraceFormat::Pcap { nanos: false }, &mixed).unwrap_err();
        assert!(matches!(err, WriteError::MixedLinkTypes { first: 1, found: 113 }), "{err}");
    }

    #[test]
    fn empty_traces_are_readable() {
        for format in [TraceFormat::Pcap { nanos: false }, TraceFormat::Pcapng] {
            let (_, back) = read_back(write_all(format, &[]).unwrap());
            assert!(back.is_empty());
        }
    }

    #[test]
    fn the_output_format_follows_the_input() {
        assert_eq!(TraceFormat::matching("pcap-be-nsec"), TraceFormat::Pcap { nanos: true });
        assert_eq!(TraceFormat::matching("pcap-le-modified"), TraceFormat::Pcap { nanos: false });
        assert_eq!(TraceFormat::matching("pcapng-le"), TraceFormat::Pcapng);
        assert_eq!(TraceFormat::matching("erf"), TraceFormat::Pcapng);
        assert_eq!(TraceFormat::matching("snoop"), TraceFormat::Pcapng);
    }
}
