//! Formatting one record as one line. What surrounds each value (the tab, or the comma and the
//! quoted name) is worked out once per run; values are written straight into a buffer that is
//! long enough for the whole line, so each piece is a slice copy rather than a growing push.

use std::net::IpAddr;

use sonde_types::text::{self, Line, SHARE};

use crate::columns::{Column, Kind, Value};
use crate::writer::Format;

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
        let max_len = start.len() + fields.iter().map(|f| f.prefix.len() + SHARE).sum::<usize>() + end.len();
        LineFormat { fields, start, end, quote, missing, bools, format, max_len }
    }

    /// Formats `record` as a line (newline included) in `buf`, a scratch buffer kept from line
    /// to line, and returns the line.
    pub fn format<'b>(&self, buf: &'b mut Vec<u8>, record: &R) -> &'b [u8] {
        let mut line = Line::new(buf, self.max_len);
        match self.format {
            // A tab after every field and the last turned into the newline: no test of where a
            // field is (a TSV field's separator is one byte, stored, not copied as a slice).
            Format::Tsv if !self.fields.is_empty() => {
                for field in &self.fields {
                    self.put(&mut line, field, record);
                    line.put_byte(b'\t');
                }
                line.set_last(b'\n');
            }
            _ => {
                line.put(self.start);
                for field in &self.fields {
                    line.put(&field.prefix);
                    self.put(&mut line, field, record);
                }
                line.put(self.end);
            }
        }
        line.done()
    }

    /// Writes `field`'s value of `record`.
    #[inline(always)]
    fn put(&self, line: &mut Line, field: &Field<R>, record: &R) {
        match (field.value)(record) {
            Value::Int(n) => line.put_u64(n),
            Value::Ms(ns) => line.put_with(|out| write_ms(out, ns)),
            Value::Ip(ip) => {
                line.put(self.quote);
                line.put_with(|out| text::ip(out, ip));
                line.put(self.quote);
            }
            // Our static texts never need JSON escaping.
            Value::Text(s) => line.put_text(self.quote, s),
            Value::Str(s) => put_escaped(line, self.format, s),
            Value::Owned(s) => put_escaped(line, self.format, &s),
            Value::Id(id) => line.put_text(self.quote, id.as_str()),
            Value::Bool(b) => line.put(self.bools[usize::from(b)]),
            Value::Missing => line.put(self.missing),
            Value::NoSample => line.put(field.no_sample),
        }
    }
}

/// A text from the traffic, escaped for `format` (TSV: `\\`, `\t`, `\n`, `\r`; JSON: a
/// string literal).
fn put_escaped(line: &mut Line, format: Format, s: &str) {
    let plain = match format {
        Format::Tsv => !s.bytes().any(|b| matches!(b, b'\\' | b'\t' | b'\n' | b'\r')),
        Format::Jsonl => !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\'),
    };
    // Names from the traffic rarely need escaping: then they are copied as they are.
    if plain {
        let quote: &[u8] = if format == Format::Jsonl { b"\"" } else { b"" };
        return line.put_text(quote, s);
    }
    let mut escaped = String::with_capacity(s.len() + 2);
    match format {
        Format::Tsv => {
            for c in s.chars() {
                match c {
                    '\\' => escaped.push_str("\\\\"),
                    '\t' => escaped.push_str("\\t"),
                    '\n' => escaped.push_str("\\n"),
                    '\r' => escaped.push_str("\\r"),
                    c => escaped.push(c),
                }
            }
        }
        Format::Jsonl => escaped = serde_json::to_string(s).expect("a string serialises"),
    }
    line.put_text(b"", &escaped);
}

/// Writes `ns` nanoseconds at the start of `out` as milliseconds with three decimals, rounded
/// half up to the microsecond.
#[inline]
fn write_ms(out: &mut [u8], ns: u64) -> usize {
    // Over half of them are zero (events that did not happen).
    if ns < 500 {
        out[..5].copy_from_slice(b"0.000");
        return 5;
    }
    text::decimal(out, ns / 1000 + u64::from(ns % 1000 >= 500), 3)
}

/// Room for an address's text (the spare bytes the dotted-quad writer copies included).
pub type IpBuf = [u8; text::IP_MAX];

/// `ip` as the logs spell it, written in `buf` (for the typed outputs: the same text, as fast).
pub fn ip_text(ip: IpAddr, buf: &mut IpBuf) -> &str {
    let len = text::ip(buf, ip);
    std::str::from_utf8(&buf[..len]).expect("an address's text is ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(put: impl FnOnce(&mut Line)) -> String {
        let mut buf = Vec::new();
        let mut line = Line::new(&mut buf, SHARE);
        put(&mut line);
        String::from_utf8(line.done().to_vec()).unwrap()
    }

    #[test]
    fn texts_from_the_traffic_are_escaped_only_when_they_must() {
        let tsv = |s: &str| written(|l| put_escaped(l, Format::Tsv, s));
        let json = |s: &str| written(|l| put_escaped(l, Format::Jsonl, s));
        assert_eq!(tsv("www.example.org"), "www.example.org");
        assert_eq!(tsv("a\tb\nc\\d\re"), "a\\tb\\nc\\\\d\\re");
        assert_eq!(json("www.example.org"), "\"www.example.org\"");
        assert_eq!(json("a\"b\u{1}é"), "\"a\\\"b\\u0001é\"");
        let long = "x".repeat(3 * SHARE);
        assert_eq!(tsv(&long), long, "a long name makes room for itself");
    }

    #[test]
    fn milliseconds_round_half_up_to_the_microsecond() {
        let ms = |ns| written(|l| l.put_with(|out| write_ms(out, ns)));
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
            assert_eq!(written(|l| l.put_u64(n)), n.to_string());
        }
        for ip in [
            "0.0.0.0",
            "192.168.100.255",
            "9.10.99.100",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "::ffff:1.2.3.4",
            "fd77::2",
        ] {
            assert_eq!(written(|l| l.put_with(|out| text::ip(out, ip.parse().unwrap()))), ip);
        }
    }

    #[test]
    fn long_texts_make_room() {
        const LONG: &str = "a text longer than the forty-seven bytes a value may take otherwise, with its quotes";
        for len in [1, SHARE - 2, SHARE - 1, SHARE, LONG.len()] {
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
