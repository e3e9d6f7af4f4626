//! A whole trace through a [`Thinner`]: every frame read, decoded, and written if kept — what
//! `sonde thin` does. Reading and writing are the caller's (a sonde-capture source and
//! writer); the frames are thinned as [`Thinner::keep`] decides, in input order.

use std::io::Write;

use sonde_capture::{CaptureError, PacketSource, TraceWriter, WriteError};
use sonde_wire::{LinkType, PacketSummary};

use crate::Thinner;

/// What [`thin_trace`] read and wrote, and why the input ended early if it did.
#[derive(Debug)]
#[non_exhaustive]
pub struct ThinnedTrace {
    pub frames_read: u64,
    pub frames_written: u64,
    /// Frames of link types sonde cannot decode: written unchanged.
    pub frames_undecoded: u64,
    /// The error that ended the input early; the output holds every kept frame before it.
    pub input_error: Option<CaptureError>,
}

/// Reads `source` to its end, writes the frames `thinner` keeps to `writer`, and finishes the
/// writer (header of an empty trace, flush). A damaged input is not an error: it ends the
/// trace and is returned in [`ThinnedTrace::input_error`]. Only writing can fail.
pub fn thin_trace<W: Write>(
    source: &mut dyn PacketSource,
    thinner: &mut Thinner,
    mut writer: TraceWriter<W>,
) -> Result<ThinnedTrace, WriteError> {
    let (mut frames_read, mut frames_undecoded) = (0u64, 0u64);
    let mut packet = PacketSummary::EMPTY;
    let input_error = loop {
        let frame = match source.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break None,
            Err(e) => break Some(e),
        };
        frames_read += 1;
        // A frame sonde cannot decode passes unchanged: never drop what could not be read.
        let keep = match sonde_wire::decode_into(LinkType(frame.link_type), frame.data, frame.wire_len, &mut packet) {
            Ok(()) => thinner.keep(frame.ts_ns, &packet, frame.wire_len),
            Err(_) => {
                frames_undecoded += 1;
                true
            }
        };
        if keep {
            writer.write(frame.ts_ns, frame.wire_len, frame.link_type, frame.data)?;
        }
    };
    let frames_written = writer.frames();
    writer.finish()?;
    Ok(ThinnedTrace { frames_read, frames_written, frames_undecoded, input_error })
}

#[cfg(test)]
mod tests {
    use sonde_capture::{TraceFormat, LINKTYPE_ETHERNET};

    use super::*;
    use crate::Config;

    const ACK: u8 = 0x10;
    const SYN_ACK: u8 = 0x12;
    /// LINKTYPE_USER0: a link type sonde does not decode.
    const USER0: u32 = 147;

    /// Ethernet + IPv4 + TCP without payload, 10.0.0.1:40000 ↔ 192.0.2.80:80.
    fn tcp(to_server: bool, seq: u32, ack: u32, flags: u8) -> Vec<u8> {
        let (client, server) = ([10, 0, 0, 1], [192, 0, 2, 80]);
        let (src, dst, sport, dport) =
            if to_server { (client, server, 40000u16, 80u16) } else { (server, client, 80, 40000) };
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&seq.to_be_bytes());
        f.extend_from_slice(&ack.to_be_bytes());
        f.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        f
    }

    /// A pcapng trace: a handshake's SYN/ACK and ACK, a later pure ACK, and a frame of a link
    /// type sonde cannot decode.
    fn trace() -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), TraceFormat::Pcapng);
        let frames = [
            (LINKTYPE_ETHERNET, tcp(false, 5000, 1001, SYN_ACK)),
            (LINKTYPE_ETHERNET, tcp(true, 1001, 5001, ACK)),
            (USER0, vec![0xab; 20]),
            (LINKTYPE_ETHERNET, tcp(true, 1001, 5001, ACK)),
        ];
        for (i, (link_type, data)) in frames.iter().enumerate() {
            w.write(i as u64 * 1_000_000, data.len() as u32, *link_type, data).unwrap();
        }
        w.finish().unwrap()
    }

    fn thin(input: Vec<u8>) -> (ThinnedTrace, Thinner, Vec<u8>) {
        let mut source = sonde_capture::open_bytes(input).unwrap();
        let mut thinner = Thinner::new(&Config::default()).unwrap();
        let mut out = Vec::new();
        let writer = TraceWriter::new(&mut out, TraceFormat::Pcapng);
        let thinned = thin_trace(source.as_mut(), &mut thinner, writer).unwrap();
        (thinned, thinner, out)
    }

    fn link_types(trace: Vec<u8>) -> Vec<u32> {
        let mut source = sonde_capture::open_bytes(trace).unwrap();
        let mut found = Vec::new();
        while let Some(frame) = source.next_frame().unwrap() {
            found.push(frame.link_type);
        }
        found
    }

    #[test]
    fn kept_frames_are_written_and_counted() {
        let (thinned, thinner, out) = thin(trace());
        assert_eq!((thinned.frames_read, thinned.frames_written, thinned.frames_undecoded), (4, 3, 1));
        assert!(thinned.input_error.is_none());
        // The later pure ACK goes; the undecodable frame passes.
        assert_eq!(thinner.stats().dropped_packets, 1);
        assert_eq!(link_types(out), [LINKTYPE_ETHERNET, LINKTYPE_ETHERNET, USER0]);
    }

    #[test]
    fn a_damaged_input_ends_the_trace_and_keeps_what_came_before() {
        let mut input = trace();
        input.truncate(input.len() - 10);
        let (thinned, _, out) = thin(input);
        assert_eq!((thinned.frames_read, thinned.frames_written), (3, 3));
        assert!(thinned.input_error.is_some());
        assert_eq!(link_types(out), [LINKTYPE_ETHERNET, LINKTYPE_ETHERNET, USER0]);
    }

    #[test]
    fn an_empty_trace_gives_an_empty_trace() {
        let empty = TraceWriter::new(Vec::new(), TraceFormat::Pcap { nanos: false }).finish().unwrap();
        let (thinned, _, out) = thin(empty);
        assert_eq!((thinned.frames_read, thinned.frames_written), (0, 0));
        assert!(link_types(out).is_empty());
    }
}
