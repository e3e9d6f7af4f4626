//! Text written into a byte buffer without the `fmt` machinery: the one writer of integers,
//! fixed-point numbers and addresses that the flow lines and the tables share. A number is
//! written two digits at a time from its last, straight into room the caller has made; a
//! [`Line`] is a line being written into such room ([`write_line`]).

use std::io::Write as _;
use std::net::IpAddr;

/// "00" to "99".
pub const PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0; 2]; 100];
    let mut i = 0;
    while i < 100 {
        pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    pairs
};

/// The most bytes [`decimal`] writes: 20 digits, a point and a leading `0`.
pub const DECIMAL_MAX: usize = 22;

/// How many decimal digits `n` has. The bit length times log10(2) (about 1233/4096) is that
/// number or one less, so one look-up settles it: cheaper than `ilog10`.
#[inline]
pub fn count(n: u64) -> usize {
    // The least number of each length but the first.
    const FLOORS: [u64; 20] = {
        let mut floors = [0; 20];
        let mut i = 1;
        while i < 20 {
            floors[i] = 10u64.pow(i as u32);
            i += 1;
        }
        floors
    };
    let guess = ((u64::BITS - (n | 1).leading_zeros()) as usize * 1233) >> 12;
    guess + usize::from(n >= FLOORS[guess])
}

/// Writes `n` in decimal at the start of `out` (which has room for its [`count`] digits) and
/// returns how many bytes it wrote.
#[inline]
pub fn write(out: &mut [u8], n: u64) -> usize {
    // Most integers are a single digit (73% of those in bench.pcap's logs).
    if n < 10 {
        out[0] = b'0' + n as u8;
        return 1;
    }
    let digits = count(n);
    fixed(&mut out[..digits], n);
    digits
}

/// Writes the last `out.len()` digits of `n` into `out`, zeros first where `n` has fewer: two
/// at a time from the last.
#[inline]
pub fn fixed(out: &mut [u8], mut n: u64) {
    // By index from the end: fewer instructions a pair than a chunk iterator.
    let mut end = out.len();
    while end >= 2 {
        out[end - 2..end].copy_from_slice(&PAIRS[(n % 100) as usize]);
        n /= 100;
        end -= 2;
    }
    if end == 1 {
        out[0] = b'0' + (n % 10) as u8;
    }
}

/// 10^0 to 10^19.
const POW10: [u64; 20] = {
    let mut pow = [1; 20];
    let mut i = 1;
    while i < 20 {
        pow[i] = pow[i - 1] * 10;
        i += 1;
    }
    pow
};

/// Writes `units` × 10^-`decimals` at the start of `out` (room for [`DECIMAL_MAX`] bytes) with
/// exactly `decimals` decimals and at least one digit before the point (`0.005`, `12.500`, `7`
/// without decimals); returns how many bytes it wrote. `decimals` ≤ 19.
#[inline]
pub fn decimal(out: &mut [u8], units: u64, decimals: usize) -> usize {
    if decimals == 0 {
        return write(out, units);
    }
    let pow = POW10[decimals];
    let len = write(out, units / pow);
    out[len] = b'.';
    fixed(&mut out[len + 1..len + 1 + decimals], units % pow);
    len + 1 + decimals
}

/// Each octet's decimal text and its length, padded to four bytes so that it is copied whole.
const OCTETS: [([u8; 4], usize); 256] = {
    let mut octets = [([0; 4], 0); 256];
    let mut i = 0;
    while i < 256 {
        let [tens, ones] = PAIRS[i % 100];
        octets[i] = match i {
            0..=9 => ([ones, 0, 0, 0], 1),
            10..=99 => ([tens, ones, 0, 0], 2),
            _ => ([b'0' + (i / 100) as u8, tens, ones, 0], 3),
        };
        i += 1;
    }
    octets
};

/// The most bytes [`ip`] needs in `out`: an IPv6 address's longest text (45), or a dotted
/// quad's 15 and the 3 spare bytes its last octet's copy takes.
pub const IP_MAX: usize = 45;

/// Writes `ip` at the start of `out` (room for [`IP_MAX`] bytes) as `Display` writes it: a
/// dotted quad by hand (the common case, and std's is slow), IPv6 by std's rules.
#[inline]
pub fn ip(out: &mut [u8], ip: IpAddr) -> usize {
    match ip {
        IpAddr::V4(v4) => {
            let mut len = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out[len] = b'.';
                    len += 1;
                }
                let (text, digits) = &OCTETS[usize::from(octet)];
                out[len..len + 4].copy_from_slice(text);
                len += digits;
            }
            len
        }
        IpAddr::V6(v6) => {
            let room = out.len();
            let mut rest = out;
            write!(rest, "{v6}").expect("an IPv6 address fits in IP_MAX bytes");
            room - rest.len()
        }
    }
}

/// The room a [`Line`] keeps for each value but a text: an IPv6 address's longest text (45)
/// between quotes.
pub const SHARE: usize = IP_MAX + 2;

/// Room a line keeps past every value's share, for texts longer than theirs (a line whose
/// long texts need more is written again with more).
pub const LONG_TEXTS: usize = 1024;

/// Writes a line with `write` at the start of `buf` (a scratch buffer kept from line to line)
/// and returns its length. `write` puts at most `room` bytes but for what its texts have
/// beyond their [`SHARE`]: those take the room kept past it, and when they need more than
/// there is, `buf` is grown and the line written again.
#[inline(always)]
pub fn write_line(buf: &mut Vec<u8>, room: usize, mut write: impl FnMut(&mut Line)) -> usize {
    let mut want = room + LONG_TEXTS;
    loop {
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let slack = buf.len() - room;
        let mut line = Line { out: buf.as_mut_slice(), len: 0, slack, short: 0 };
        write(&mut line);
        let (len, short) = (line.len, line.short);
        if short == 0 {
            return len;
        }
        want = buf.len() + short;
    }
}

/// A line being written: the bytes of `out` up to `len`, with room after them for the values
/// still to come ([`SHARE`] each) and `slack` more for long texts. It holds the buffer as a
/// slice, never the `Vec`, and its methods are always inlined, so that the buffer's address,
/// its length and `len` stay in registers (when the `Vec` went to a method that may grow it,
/// every later field loaded them again; with one method left out of line, the Line lived in
/// memory and formatting took 12% more instructions).
pub struct Line<'b> {
    out: &'b mut [u8],
    len: usize,
    /// Room left for texts longer than their share.
    slack: usize,
    /// What the long texts that did not fit needed beyond `slack` (they were left out).
    short: usize,
}

impl<'b> Line<'b> {
    /// How many bytes are written.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is written yet.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn put(&mut self, bytes: &[u8]) {
        let out = &mut self.out[self.len..self.len + bytes.len()];
        match bytes {
            // The common pieces of a TSV line, stored without a memcpy call.
            [] => {}
            [b] => out[0] = *b,
            _ => out.copy_from_slice(bytes),
        }
        self.len += bytes.len();
    }

    /// Replaces the last byte written (a separator that turns out to end the line).
    #[inline(always)]
    pub fn set_last(&mut self, byte: u8) {
        self.out[self.len - 1] = byte;
    }

    #[inline(always)]
    pub fn put_byte(&mut self, byte: u8) {
        self.out[self.len] = byte;
        self.len += 1;
    }

    /// Lets `write` fill the free space, and keeps the number of bytes it says it wrote.
    #[inline(always)]
    pub fn put_with(&mut self, write: impl FnOnce(&mut [u8]) -> usize) {
        self.len += write(&mut self.out[self.len..]);
    }

    /// `s` between `quote`s; when that is longer than a value's share, it takes the rest from
    /// the line's slack (or, when that is short, is left out and the line written again).
    #[inline(always)]
    pub fn put_text(&mut self, quote: &[u8], s: &str) {
        let len = quote.len() + s.len() + quote.len();
        if len > SHARE && !self.take_slack(len - SHARE) {
            return;
        }
        self.put(quote);
        self.put(s.as_bytes());
        self.put(quote);
    }

    /// Takes `excess` bytes from the slack; `false` (and the line marked short) without it.
    #[inline(always)]
    fn take_slack(&mut self, excess: usize) -> bool {
        if excess <= self.slack {
            self.slack -= excess;
            true
        } else {
            self.short += excess;
            false
        }
    }

    #[inline(always)]
    pub fn put_u64(&mut self, n: u64) {
        self.put_with(|out| write(out, n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(write: impl FnOnce(&mut [u8]) -> usize) -> String {
        let mut buf = [0; DECIMAL_MAX];
        let len = write(&mut buf);
        String::from_utf8(buf[..len].to_vec()).unwrap()
    }

    #[test]
    fn integers_are_written_as_display_writes_them() {
        let powers = (0..20).map(|i| 10u64.pow(i));
        let edges = powers.flat_map(|p| [p - 1, p, p + 1]).chain((0..64).map(|i| 1 << i)).chain([12_345, u64::MAX]);
        for n in edges {
            assert_eq!(text(|out| write(out, n)), n.to_string());
            assert_eq!(count(n), n.to_string().len());
        }
    }

    #[test]
    fn decimals_keep_their_zeros() {
        assert_eq!(text(|out| decimal(out, 0, 3)), "0.000");
        assert_eq!(text(|out| decimal(out, 5, 3)), "0.005");
        assert_eq!(text(|out| decimal(out, 12_500, 3)), "12.500");
        assert_eq!(text(|out| decimal(out, 7, 0)), "7");
        assert_eq!(text(|out| decimal(out, 1_700_000_100_000_000, 6)), "1700000100.000000");
        assert_eq!(text(|out| decimal(out, u64::MAX, 9)), "18446744073.709551615");
        assert_eq!(text(|out| decimal(out, u64::MAX, 19)), "1.8446744073709551615");
        assert_eq!(text(|out| decimal(out, 1, 19)), "0.0000000000000000001");
    }

    /// Texts beyond the slack a line keeps make the line be written again, with more room.
    #[test]
    fn long_texts_are_written_whole() {
        let texts = ["a".repeat(SHARE + 1), "b".repeat(LONG_TEXTS), "c".repeat(3 * LONG_TEXTS)];
        let mut buf = Vec::new();
        let mut tries = 0;
        let len = write_line(&mut buf, 3 * SHARE, |line| {
            tries += 1;
            for t in &texts {
                line.put_text(b"\"", t);
            }
        });
        let want: String = texts.iter().map(|t| format!("\"{t}\"")).collect();
        assert_eq!((std::str::from_utf8(&buf[..len]).unwrap(), tries), (want.as_str(), 2));
        // The buffer keeps its room: the same line is written at once.
        tries = 0;
        write_line(&mut buf, 3 * SHARE, |line| {
            tries += 1;
            texts.iter().for_each(|t| line.put_text(b"", t));
        });
        assert_eq!(tries, 1);
    }

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for addr in
            ["0.0.0.0", "192.168.100.255", "9.10.99.100", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::ffff:1.2.3.4"]
        {
            let mut buf = [0; IP_MAX];
            let len = ip(&mut buf, addr.parse().unwrap());
            assert_eq!(std::str::from_utf8(&buf[..len]).unwrap(), addr);
        }
    }
}
