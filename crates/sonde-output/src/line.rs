//! Formatting one record as one line. What surrounds each value (the tab, or the comma and the
//! quoted name) is worked out once per run; values are written straight into a buffer that is
//! long enough for the whole line, so each piece is a slice copy rather than a growing push.

use std::io::Write as _;
use std::net::IpAddr;

use crate::columns::{Column, Kind, Value};
use crate::writer::Format;

/// The most bytes a value other than a text can take: an IPv6 address (at most 45) in quotes.
const VALUE_MAX: usize = 47;

/// "00" to "99".
const PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0; 2]; 100];
    let mut i = 0;
    while i < 100 {
        pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    pairs
};

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

/// A column as written: the bytes before its value, and how to read the value.
struct Field<R> {
    prefix: Box<[u8]>,
    value: fn(&R) -> Value<'_>,
    /// What [`Value::NoSample`] prints: Tstat's zero in TSV, `null` in JSON (as in Parquet).
    no_sample: &'static [u8],
}

/// How records of one kind become lines in one format.
pub struct LineFormat<R> {
    fields: Vec<Field<R>>,
    start: &'static [u8],
    end: &'static [u8],
    quote: &'static [u8],
    missing: &'static [u8],
    /// `false` then `true`.
    bools: [&'static [u8]; 2],
    format: Format,
    /// The longest line without long texts.
    max_len: usize,
}

impl<R> LineFormat<R> {
    pub fn new(format: Format, columns: &[Column<R>]) -> LineFormat<R> {
        let prefix = |i: usize, name: &str| -> Box<[u8]> {
            let sep = match (i, format) {
                (0, _) => "",
                (_, Format::Tsv) => "\t",
                (_, Format::Jsonl) => ",",
            };
            match format {
                Format::Tsv => sep.as_bytes().into(),
                Format::Jsonl => format!("{sep}\"{name}\":").into_bytes().into(),
            }
        };
        let no_sample = |kind: Kind| -> &'static [u8] {
            match (format, kind) {
                (Format::Jsonl, _) => b"null",
                (Format::Tsv, Kind::Time | Kind::Duration) => b"0.000",
                (Format::Tsv, _) => b"0",
            }
        };
        let fields: Vec<_> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field { prefix: prefix(i, c.name), value: c.value, no_sample: no_sample(c.kind) })
            .collect();
        let (start, end, quote, missing, bools): (_, _, _, _, [&[u8]; 2]) = match format {
            Format::Tsv => (&b""[..], &b"\n"[..], &b""[..], &b"-"[..], [b"0", b"1"]),
            Format::Jsonl => (b"{", b"}\n", b"\"", b"null", [b"false", b"true"]),
        };
        let max_len = start.len() + fields.iter().map(|f| f.prefix.len() + VALUE_MAX).sum::<usize>() + end.len();
        LineFormat { fields, start, end, quote, missing, bools, format, max_len }
    }

    /// Formats `record` as a line (newline included) in `buf`, a scratch buffer kept from line
    /// to line, and returns the line.
    pub fn format<'b>(&self, buf: &'b mut Vec<u8>, record: &R) -> &'b [u8] {
        if buf.len() < self.max_len {
            buf.resize(self.max_len, 0);
        }
        let mut line = Line { buf, len: 0 };
        line.put(self.start);
        // A TSV field's prefix is one tab (none for the first): stored as a byte, not copied
        // as a slice (15 instructions a field less).
        let tsv = self.format == Format::Tsv;
        for (i, field) in self.fields.iter().enumerate() {
            if !tsv {
                line.put(&field.prefix);
            } else if i > 0 {
                line.put_byte(b'\t');
            }
            match (field.value)(record) {
                Value::Int(n) => line.put_u64(n),
                Value::Ms(ns) => line.put_with(|out| write_ms(out, ns)),
                Value::Ip(ip) => {
                    line.put(self.quote);
                    line.put_with(|out| write_ip(out, ip));
                    line.put(self.quote);
                }
                // Our static texts never need JSON escaping.
                Value::Text(s) => line.put_text(self.quote, s),
                Value::Str(s) => line.put_escaped(self.format, s),
                Value::Owned(s) => line.put_escaped(self.format, &s),
                Value::Bool(b) => line.put(self.bools[usize::from(b)]),
                Value::Missing => line.put(self.missing),
                Value::NoSample => line.put(field.no_sample),
            }
        }
        line.put(self.end);
        let len = line.len;
        &buf[..len]
    }
}

/// A line being written: the first `len` bytes of `buf`, which has room for the rest (each
/// column's share is `VALUE_MAX`; a longer text makes room for itself). Its methods are always
/// inlined, and the longer writers below take the free space as a slice, so that `len` stays
/// in a register (with one method left out of line, the Line lived in memory and formatting
/// took 12% more instructions).
struct Line<'b> {
    buf: &'b mut Vec<u8>,
    len: usize,
}

impl Line<'_> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let out = &mut self.buf[self.len..self.len + bytes.len()];
        match bytes {
            // The common pieces of a TSV line, stored without a memcpy call.
            [] => {}
            [b] => out[0] = *b,
            _ => out.copy_from_slice(bytes),
        }
        self.len += bytes.len();
    }

    #[inline(always)]
    fn put_byte(&mut self, byte: u8) {
        self.buf[self.len] = byte;
        self.len += 1;
    }

    /// Lets `write` fill the free space, and keeps the number of bytes it says it wrote.
    #[inline(always)]
    fn put_with(&mut self, write: impl FnOnce(&mut [u8]) -> usize) {
        self.len += write(&mut self.buf[self.len..]);
    }

    /// `s` between `quote`s; when that is longer than a value's share, it makes room for itself.
    #[inline(always)]
    fn put_text(&mut self, quote: &[u8], s: &str) {
        let len = quote.len() + s.len() + quote.len();
        if len > VALUE_MAX {
            self.buf.resize(self.buf.len() + len, 0);
        }
        self.put(quote);
        self.put(s.as_bytes());
        self.put(quote);
    }

    /// A text from the traffic, escaped for `format` (TSV: `\\`, `\t`, `\n`, `\r`; JSON: a
    /// string literal).
    fn put_escaped(&mut self, format: Format, s: &str) {
        let plain = match format {
            Format::Tsv => !s.bytes().any(|b| matches!(b, b'\\' | b'\t' | b'\n' | b'\r')),
            Format::Jsonl => !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\'),
        };
        // Names from the traffic rarely need escaping: then they are copied as they are.
        if plain {
            let quote: &[u8] = if format == Format::Jsonl { b"\"" } else { b"" };
            return self.put_text(quote, s);
        }
        let mut text = String::with_capacity(s.len() + 2);
        match format {
            Format::Tsv => {
                for c in s.chars() {
                    match c {
                        '\\' => text.push_str("\\\\"),
                        '\t' => text.push_str("\\t"),
                        '\n' => text.push_str("\\n"),
                        '\r' => text.push_str("\\r"),
                        c => text.push(c),
                    }
                }
            }
            Format::Jsonl => text = serde_json::to_string(s).expect("a string serialises"),
        }
        self.put_text(b"", &text);
    }

    /// Most integers are a single digit (73% of those in bench.pcap's logs).
    #[inline(always)]
    fn put_u64(&mut self, n: u64) {
        match n {
            0..=9 => self.put_byte(b'0' + n as u8),
            _ => self.put_with(|out| write_digits(out, n)),
        }
    }
}

/// Writes `ns` nanoseconds at the start of `out` as milliseconds with three decimals, rounded
/// half up to the microsecond.
fn write_ms(out: &mut [u8], ns: u64) -> usize {
    // Over half of them are zero (events that did not happen).
    if ns < 500 {
        out[..5].copy_from_slice(b"0.000");
        return 5;
    }
    let micros = ns / 1000 + u64::from(ns % 1000 >= 500);
    let len = match micros / 1000 {
        whole @ 0..=9 => {
            out[0] = b'0' + whole as u8;
            1
        }
        whole => write_digits(out, whole),
    };
    let frac = (micros % 1000) as usize;
    let [tens, ones] = PAIRS[frac % 100];
    out[len..len + 4].copy_from_slice(&[b'.', b'0' + (frac / 100) as u8, tens, ones]);
    len + 4
}

/// Writes `n` in decimal at the start of `out`, from the last digit, two at a time.
fn write_digits(out: &mut [u8], mut n: u64) -> usize {
    let digits = decimal_digits(n);
    let (first, pairs) = out[..digits].split_at_mut(digits % 2);
    for pair in pairs.rchunks_exact_mut(2) {
        pair.copy_from_slice(&PAIRS[(n % 100) as usize]);
        n /= 100;
    }
    if let [digit] = first {
        *digit = b'0' + n as u8;
    }
    digits
}

/// How many decimal digits `n` has. The bit length times log10(2) (about 1233/4096) is that
/// number or one less, so one look-up settles it: cheaper than `ilog10`.
fn decimal_digits(n: u64) -> usize {
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

/// Room for an address's text (and the spare bytes the dotted-quad writer copies).
pub type IpBuf = [u8; VALUE_MAX + 1];

/// `ip` as the logs spell it, written in `buf` (for the typed outputs: the same text, as fast).
pub fn ip_text(ip: IpAddr, buf: &mut IpBuf) -> &str {
    let len = write_ip(buf, ip);
    std::str::from_utf8(&buf[..len]).expect("an address's text is ASCII")
}

/// Writes `ip` at the start of `out`: a dotted quad by hand (the common case, and std's Display
/// is slow), IPv6 by std's rules.
fn write_ip(out: &mut [u8], ip: IpAddr) -> usize {
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
            write!(rest, "{v6}").expect("an IPv6 address fits in VALUE_MAX");
            room - rest.len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(put: impl FnOnce(&mut Line)) -> String {
        let mut buf = vec![0; VALUE_MAX];
        let mut line = Line { buf: &mut buf, len: 0 };
        put(&mut line);
        let len = line.len;
        String::from_utf8(buf[..len].to_vec()).unwrap()
    }

    #[test]
    fn texts_from_the_traffic_are_escaped_only_when_they_must() {
        let tsv = |s: &str| text(|l| l.put_escaped(Format::Tsv, s));
        let json = |s: &str| text(|l| l.put_escaped(Format::Jsonl, s));
        assert_eq!(tsv("www.example.org"), "www.example.org");
        assert_eq!(tsv("a\tb\nc\\d\re"), "a\\tb\\nc\\\\d\\re");
        assert_eq!(json("www.example.org"), "\"www.example.org\"");
        assert_eq!(json("a\"b\u{1}é"), "\"a\\\"b\\u0001é\"");
        let long = "x".repeat(3 * VALUE_MAX);
        assert_eq!(tsv(&long), long, "a long name makes room for itself");
    }

    #[test]
    fn milliseconds_round_half_up_to_the_microsecond() {
        let ms = |ns| text(|l| l.put_with(|out| write_ms(out, ns)));
        assert_eq!(ms(0), "0.000");
        assert_eq!(ms(499), "0.000");
        assert_eq!(ms(500), "0.001");
        assert_eq!(ms(20_288_499), "20.288");
        assert_eq!(ms(1_795_300_702_508_506_000), "1795300702508.506");
        assert_eq!(ms(u64::MAX), "18446744073709.552");
    }

    #[test]
    fn integers_and_addresses_fit_their_share() {
        let powers = (0..20).map(|i| 10u64.pow(i));
        let edges = powers.flat_map(|p| [p - 1, p, p + 1]).chain((0..64).map(|i| 1 << i)).chain([12_345, u64::MAX]);
        for n in edges {
            assert_eq!(text(|l| l.put_u64(n)), n.to_string());
            assert_eq!(decimal_digits(n), n.to_string().len());
        }
        for ip in [
            "0.0.0.0",
            "192.168.100.255",
            "9.10.99.100",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "::ffff:1.2.3.4",
            "fd77::2",
        ] {
            assert_eq!(text(|l| l.put_with(|out| write_ip(out, ip.parse().unwrap()))), ip);
        }
    }

    #[test]
    fn long_texts_make_room() {
        const LONG: &str = "a text longer than the forty-seven bytes a value may take otherwise, with its quotes";
        for len in [1, VALUE_MAX - 2, VALUE_MAX - 1, VALUE_MAX, LONG.len()] {
            let cols: Vec<Column<&'static str>> = (0..3)
                .map(|_| Column { name: "t", kind: Kind::Label, value: |s: &&'static str| Value::Text(s) })
                .collect();
            let text = &LONG[..len];
            let mut buf = Vec::new();
            let tsv = LineFormat::new(Format::Tsv, &cols).format(&mut buf, &text).to_vec();
            assert_eq!(String::from_utf8(tsv).unwrap(), format!("{text}\t{text}\t{text}\n"));
            let mut buf = Vec::new();
            let json = LineFormat::new(Format::Jsonl, &cols).format(&mut buf, &text).to_vec();
            assert_eq!(
                String::from_utf8(json).unwrap(),
                format!("{{\"t\":\"{text}\",\"t\":\"{text}\",\"t\":\"{text}\"}}\n")
            );
        }
    }
}
