//! A whole trace through a [`Rewriter`]: every frame read, rewritten, cut to the snaplen and
//! written — what `sonde anon` does. Reading and writing are the caller's (a sonde-capture
//! source and writer).

use std::io::Write;

use sonde_capture::{CaptureError, PacketSource, TraceWriter, WriteError};

use crate::{LinkType, Rewriter};

/// What [`rewrite_trace`] wrote, and why the input ended early if it did. The rewriting
/// counters are the rewriter's ([`Rewriter::stats`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct RewrittenTrace {
    pub frames_written: u64,
    /// Frames longer than the snaplen, written cut to it.
    pub frames_cut: u64,
    /// The error that ended the input early; the output holds every frame before it.
    pub input_error: Option<CaptureError>,
}

/// Reads `source` to its end, rewrites every frame, cuts it to `snaplen` bytes if given (after
/// the checksums are computed: the length on the wire is kept) and writes it to `writer`, then
/// finishes the writer (header of an empty trace, flush). A damaged input is not an error: it
/// ends the trace and is returned in [`RewrittenTrace::input_error`]. Only writing can fail.
pub fn rewrite_trace<W: Write>(
    source: &mut dyn PacketSource,
    rewriter: &mut Rewriter,
    snaplen: Option<u32>,
    mut writer: TraceWriter<W>,
) -> Result<RewrittenTrace, WriteError> {
    let snaplen = snaplen.map_or(usize::MAX, |n| n as usize);
    // One buffer for every frame: the source's frame is borrowed, the rewrite is in place.
    let mut frame_bytes = Vec::new();
    let mut frames_cut = 0;
    let input_error = loop {
        let frame = match source.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break None,
            Err(e) => break Some(e),
        };
        frame_bytes.clear();
        frame_bytes.extend_from_slice(frame.data);
        rewriter.rewrite(LinkType(frame.link_type), &mut frame_bytes, frame.wire_len);
        if frame_bytes.len() > snaplen {
            frame_bytes.truncate(snaplen);
            frames_cut += 1;
        }
        // The wire length stays what the input said (never below the captured length).
        let wire_len = frame.wire_len.max(u32::try_from(frame.data.len()).unwrap_or(u32::MAX));
        writer.write(frame.ts_ns, wire_len, frame.link_type, &frame_bytes)?;
    };
    let frames_written = writer.frames();
    writer.finish()?;
    Ok(RewrittenTrace { frames_written, frames_cut, input_error })
}

#[cfg(test)]
mod tests {
    use sonde_anon::Anonymizer;
    use sonde_capture::TraceFormat;

    use super::*;

    /// Raw IPv4, ICMP echo request from 192.0.2.1 to 198.51.100.2 (checksums right).
    const ECHO: [u8; 28] = [
        0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0xf6, 0x5f, 192, 0, 2, 1, 198, 51, 100, 2, //
        8, 0, 0xf7, 0xfe, 0, 1, 0, 0,
    ];

    /// A pcap of `n` echo requests, 1 ms apart.
    fn trace(n: u64) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), TraceFormat::Pcap { nanos: true });
        for i in 0..n {
            w.write(i * 1_000_000, ECHO.len() as u32, LinkType::RAW.0, &ECHO).unwrap();
        }
        w.finish().unwrap()
    }

    fn rewrite(input: Vec<u8>, snaplen: Option<u32>) -> (RewrittenTrace, Rewriter, Vec<u8>) {
        let mut source = sonde_capture::open_bytes(input).unwrap();
        let mut rewriter = Rewriter::new(Anonymizer::zero());
        let mut out = Vec::new();
        let writer = TraceWriter::new(&mut out, TraceFormat::Pcap { nanos: true });
        let rewritten = rewrite_trace(source.as_mut(), &mut rewriter, snaplen, writer).unwrap();
        (rewritten, rewriter, out)
    }

    /// Each frame of `trace`: its time, wire length and captured bytes.
    fn frames(trace: Vec<u8>) -> Vec<(u64, u32, Vec<u8>)> {
        let mut source = sonde_capture::open_bytes(trace).unwrap();
        let mut found = Vec::new();
        while let Some(f) = source.next_frame().unwrap() {
            found.push((f.ts_ns, f.wire_len, f.data.to_vec()));
        }
        found
    }

    #[test]
    fn every_frame_is_rewritten_and_written() {
        let (rewritten, rewriter, out) = rewrite(trace(3), None);
        assert_eq!((rewritten.frames_written, rewritten.frames_cut), (3, 0));
        assert!(rewritten.input_error.is_none());
        assert_eq!(rewriter.stats().frames, 3);
        assert_eq!(rewriter.stats().ipv4_addresses, 6);
        let written = frames(out);
        assert_eq!(written.len(), 3);
        for (i, (ts_ns, wire_len, data)) in written.into_iter().enumerate() {
            assert_eq!((ts_ns, wire_len), (i as u64 * 1_000_000, 28));
            assert_eq!(&data[12..20], &[0; 8], "addresses zeroed");
            assert_eq!(&data[20..], &ECHO[20..], "ICMP untouched");
        }
    }

    #[test]
    fn the_snaplen_cuts_frames_and_keeps_their_wire_length() {
        let (rewritten, _, out) = rewrite(trace(2), Some(20));
        assert_eq!((rewritten.frames_written, rewritten.frames_cut), (2, 2));
        for (_, wire_len, data) in frames(out) {
            assert_eq!((wire_len, data.len()), (28, 20));
            assert_eq!(&data[12..20], &[0; 8]);
        }
    }

    #[test]
    fn a_damaged_input_ends_the_trace_and_keeps_what_came_before() {
        let mut input = trace(3);
        input.truncate(input.len() - 5);
        let (rewritten, _, out) = rewrite(input, None);
        assert_eq!(rewritten.frames_written, 2);
        assert!(rewritten.input_error.is_some());
        assert_eq!(frames(out).len(), 2);
    }
}
