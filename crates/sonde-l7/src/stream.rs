//! A TCP direction's bytes in order, for the parsers: each byte once, from the direction's
//! first payload, up to [`STREAM_LIMIT_BYTES`]. Nothing is buffered: a segment past a gap (lost,
//! not captured, or reordered ahead of its predecessor) ends the direction, and the gap is
//! counted.

use crate::Problems;

/// Bytes of one TCP direction handed to parsers, at most.
pub const STREAM_LIMIT_BYTES: u32 = 16 * 1024;

/// 12 bytes (an `Option<u32>` would take 8 of them alone).
#[derive(Debug, Default)]
pub(crate) struct Stream {
    /// Valid when `started`: the sequence number of the next byte expected.
    next_seq: u32,
    /// Bytes handed on so far.
    delivered: u32,
    /// The first payload was seen.
    started: bool,
    /// A gap, a cut packet or the limit ended this direction.
    stopped: bool,
}

impl Stream {
    /// The new bytes of a segment (`payload`: its captured part, `wire_len` long on the wire)
    /// starting at `seq`; None when it brings nothing new or the direction has stopped.
    pub(crate) fn accept<'a>(
        &mut self,
        seq: u32,
        payload: &'a [u8],
        wire_len: u32,
        problems: &mut Problems,
    ) -> Option<&'a [u8]> {
        if self.stopped || wire_len == 0 {
            return None;
        }
        if !self.started {
            (self.next_seq, self.started) = (seq, true);
        }
        let next = self.next_seq;
        // Sequence arithmetic: how far past the expected byte this segment starts.
        let ahead = seq.wrapping_sub(next) as i32;
        if ahead > 0 {
            self.stopped = true;
            problems.stream_gaps += 1;
            return None;
        }
        let skip = ahead.unsigned_abs();
        if skip >= wire_len {
            return None; // a retransmission of bytes already handed on
        }
        self.next_seq = seq.wrapping_add(wire_len);
        let captured = payload.get(skip as usize..).unwrap_or(&[]);
        if (captured.len() as u64) < u64::from(wire_len - skip) {
            // Cut by the snap length: the rest of this direction would follow a hole.
            self.stopped = true;
        }
        let room = STREAM_LIMIT_BYTES.saturating_sub(self.delivered) as usize;
        if room <= captured.len() {
            self.stopped = true;
        }
        let bytes = &captured[..captured.len().min(room)];
        self.delivered += bytes.len() as u32;
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmissions_overlaps_and_gaps() {
        let mut s = Stream::default();
        let mut p = Problems::default();
        assert_eq!(s.accept(100, b"abcd", 4, &mut p), Some(&b"abcd"[..]));
        assert_eq!(s.accept(100, b"abcd", 4, &mut p), None, "a retransmission");
        assert_eq!(s.accept(102, b"cdef", 4, &mut p), Some(&b"ef"[..]), "an overlap gives its new bytes");
        assert_eq!(s.accept(110, b"xy", 2, &mut p), None, "a gap stops the direction");
        assert_eq!(p.stream_gaps, 1);
        assert_eq!(s.accept(106, b"gh", 2, &mut p), None, "stopped for good");
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut s = Stream::default();
        let mut p = Problems::default();
        assert_eq!(s.accept(u32::MAX - 1, b"ab", 2, &mut p), Some(&b"ab"[..]));
        assert_eq!(s.accept(0, b"cd", 2, &mut p), Some(&b"cd"[..]));
        assert_eq!(p, Problems::default());
    }

    #[test]
    fn a_cut_segment_and_the_limit_stop_the_direction() {
        let mut s = Stream::default();
        let mut p = Problems::default();
        assert_eq!(s.accept(0, b"ab", 10, &mut p), Some(&b"ab"[..]));
        assert_eq!(s.accept(10, b"cd", 2, &mut p), None);
        let mut s = Stream::default();
        let big = vec![0u8; STREAM_LIMIT_BYTES as usize + 10];
        assert_eq!(s.accept(0, &big, big.len() as u32, &mut p).map(<[u8]>::len), Some(STREAM_LIMIT_BYTES as usize));
        assert_eq!(s.accept(big.len() as u32, b"x", 1, &mut p), None);
    }
}
