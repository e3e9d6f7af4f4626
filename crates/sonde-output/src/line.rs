//! Formatting one record as one line. What surrounds each value (the tab, or the comma and the
//! quoted name) is worked out once per run; values are written straight into a buffer that is
//! long enough for the whole line, so each piece is a slice copy rather than a growing push.

use std::net::IpAddr;

use sonde_types::text::{self, Line, SHARE};

use crate::columns::{collect, mark_anonymized, Column, Kind, Logged, Value, Visit};
use crate::writer::Format;

/// Writes a record's line into a buffer with room for it, and returns its length.
type WriteFn<R> = fn(&mut Vec<u8>, usize, &R, &[Column<R>]) -> usize;

/// How records of one kind become lines in one format.
pub struct LineFormat<R> {
    write: WriteFn<R>,
    /// The columns [`LineFormat::new`] was given (none for a log's own: [`LineFormat::of`]).
    columns: Vec<Column<R>>,
    /// The longest line without long texts.
    max_len: usize,
}

impl<R> LineFormat<R> {
    /// Lines of `columns` in `format`, each value read through its column's function.
    pub fn new(format: Format, columns: &[Column<R>]) -> LineFormat<R> {
        let write = match format {
            Format::Tsv => write_listed::<R, false>,
            Format::Jsonl => write_listed::<R, true>,
        };
        let columns: Vec<Column<R>> =
            columns.iter().map(|c| Column { name: c.name, kind: c.kind, value: c.value }).collect();
        let max_len = max_len(format, columns.iter().map(|c| c.name));
        LineFormat { write, columns, max_len }
    }

    /// Formats `record` as a line (newline included) in `buf`, a scratch buffer kept from line
    /// to line, and returns the line.
    pub fn format<'b>(&self, buf: &'b mut Vec<u8>, record: &R) -> &'b [u8] {
        let len = (self.write)(buf, self.max_len, record, &self.columns);
        &buf[..len]
    }
}

impl<R: Logged> LineFormat<R> {
    /// The lines of `R`'s log in `format` (with `*_iscrypto` set when `anonymized`: see
    /// [`mark_anonymized`]). They are written by code generated from the column table for
    /// `R` and `format`, that reads each field straight from the record.
    pub fn of(format: Format, anonymized: bool) -> LineFormat<R> {
        if anonymized {
            return LineFormat::new(format, &mark_anonymized(collect()));
        }
        let write = match format {
            Format::Tsv => write_logged::<R, false>,
            Format::Jsonl => write_logged::<R, true>,
        };
        let max_len = max_len(format, collect::<R>().iter().map(|c| c.name));
        LineFormat { write, columns: Vec::new(), max_len }
    }
}

impl<R: Logged> LineFormat<R> {
    /// As [`LineFormat::of`], with `extra` columns after the log's own (the flow features'),
    /// each read through its function: the log's own are still written by the generated code.
    pub fn of_with(format: Format, anonymized: bool, extra: Vec<Column<R>>) -> LineFormat<R> {
        if extra.is_empty() {
            return LineFormat::of(format, anonymized);
        }
        if anonymized {
            let mut columns = mark_anonymized(collect());
            columns.extend(extra);
            return LineFormat::new(format, &columns);
        }
        let write = match format {
            Format::Tsv => write_logged_then::<R, false>,
            Format::Jsonl => write_logged_then::<R, true>,
        };
        let own = collect::<R>();
        let max_len = max_len(format, own.iter().chain(&extra).map(|c| c.name));
        LineFormat { write, columns: extra, max_len }
    }
}

/// `R`'s line by the generated code, then `extra`'s fields through their functions.
fn write_logged_then<R: Logged, const JSON: bool>(
    buf: &mut Vec<u8>,
    room: usize,
    record: &R,
    extra: &[Column<R>],
) -> usize {
    text::write_line(buf, room, |line| {
        let mut fields = Fields::<R, JSON>::new(line, record);
        R::columns(&mut fields);
        for c in extra {
            fields.column(c.name, c.kind, c.value);
        }
        fields.end();
    })
}

/// The longest line of columns named `names` in `format`, without long texts.
fn max_len<'a>(format: Format, names: impl Iterator<Item = &'a str>) -> usize {
    let per_name = match format {
        Format::Tsv => 0,
        Format::Jsonl => "\"\":".len(),
    };
    // Each value's share and its separator; the braces of JSON.
    2 + names.map(|n| per_name + n.len() + SHARE + 1).sum::<usize>()
}

/// `R`'s line, written field after field by the code [`Logged::columns`] expands to.
fn write_logged<R: Logged, const JSON: bool>(buf: &mut Vec<u8>, room: usize, record: &R, _: &[Column<R>]) -> usize {
    text::write_line(buf, room, |line| {
        let mut fields = Fields::<R, JSON>::new(line, record);
        R::columns(&mut fields);
        fields.end();
    })
}

/// A line of `columns`, each value read through its function.
fn write_listed<R, const JSON: bool>(buf: &mut Vec<u8>, room: usize, record: &R, columns: &[Column<R>]) -> usize {
    text::write_line(buf, room, |line| {
        let mut fields = Fields::<R, JSON>::new(line, record);
        for c in columns {
            fields.column(c.name, c.kind, c.value);
        }
        fields.end();
    })
}

/// A line being written field after field, as TSV or (`JSON`) as a JSON object: each field is
/// followed by its separator, and the last separator becomes the line's end.
struct Fields<'l, 'b, 'r, R, const JSON: bool> {
    line: &'l mut Line<'b>,
    record: &'r R,
}

impl<'l, 'b, 'r, R, const JSON: bool> Fields<'l, 'b, 'r, R, JSON> {
    #[inline(always)]
    fn new(line: &'l mut Line<'b>, record: &'r R) -> Self {
        if JSON {
            line.put_byte(b'{');
        }
        Fields { line, record }
    }

    /// Makes the last separator the line's end (a line without fields is a newline in TSV,
    /// `{}` in JSON).
    #[inline(always)]
    fn end(self) {
        if JSON {
            if self.line.len() == 1 {
                self.line.put_byte(b'}');
            } else {
                self.line.set_last(b'}');
            }
            self.line.put_byte(b'\n');
        } else if self.line.is_empty() {
            self.line.put_byte(b'\n');
        } else {
            self.line.set_last(b'\n');
        }
    }

    /// `s` between quotes in JSON.
    #[inline(always)]
    fn put_text(&mut self, s: &str) {
        self.line.put_text(if JSON { b"\"" } else { b"" }, s);
    }

    /// Letters and digits that never need escaping (an ID), between quotes in JSON.
    #[inline(always)]
    fn put_ascii(&mut self, s: &[u8]) {
        let quote: &[u8] = if JSON { b"\"" } else { b"" };
        self.line.put(quote);
        self.line.put(s);
        self.line.put(quote);
    }
}

impl<R, const JSON: bool> Visit<R> for Fields<'_, '_, '_, R, JSON> {
    #[inline(always)]
    fn column(&mut self, name: &'static str, kind: Kind, value: fn(&R) -> Value<'_>) {
        let line = &mut *self.line;
        if JSON {
            line.put_byte(b'"');
            line.put(name.as_bytes());
            line.put(b"\":");
        }
        match value(self.record) {
            Value::Int(n) => line.put_u64(n),
            Value::Ms(ns) => line.put_with(|out| write_ms(out, ns)),
            Value::Ip(ip) => {
                if JSON {
                    line.put_byte(b'"');
                }
                line.put_with(|out| text::ip(out, ip));
                if JSON {
                    line.put_byte(b'"');
                }
            }
            // Our static texts never need JSON escaping.
            Value::Text(s) => self.put_text(s),
            Value::Str(s) => put_escaped(line, format(JSON), s),
            Value::Owned(s) => put_escaped(line, format(JSON), &s),
            Value::Id(id) => self.put_ascii(id.as_bytes()),
            Value::Uid(uid) => self.put_ascii(uid.as_bytes()),
            Value::Float(x) => line.put_text(b"", &float_text(x, JSON)),
            Value::List(list) => line.put_text(b"", &list_text(&list, JSON)),
            Value::Bool(b) if JSON => line.put(if b { b"true" } else { b"false" }),
            Value::Bool(b) => line.put_byte(b'0' + u8::from(b)),
            Value::Missing if JSON => line.put(b"null"),
            Value::Missing => line.put_byte(b'-'),
            // Tstat's zero in TSV, `null` in JSON (as in Parquet).
            Value::NoSample if JSON => line.put(b"null"),
            Value::NoSample => match kind {
                Kind::Time | Kind::Duration => line.put(b"0.000"),
                _ => line.put_byte(b'0'),
            },
        }
        self.line.put_byte(if JSON { b',' } else { b'\t' });
    }
}

/// A double as the logs write it: the shortest decimal that reads back as the same double
/// (`null` in JSON for what is not a number, which no column gives).
#[inline(never)]
fn float_text(x: f64, json: bool) -> String {
    if json && !x.is_finite() {
        return "null".to_string();
    }
    x.to_string()
}

/// A list of integers: `1,-1` (TSV), `[1,-1]` (JSON).
#[inline(never)]
fn list_text(list: &[i64], json: bool) -> String {
    let mut out = String::with_capacity(list.len() * 4 + 2);
    if json {
        out.push('[');
    }
    let mut digits = [0u8; 20];
    for (i, &n) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if n < 0 {
            out.push('-');
        }
        let len = text::write(&mut digits, n.unsigned_abs());
        out.push_str(std::str::from_utf8(&digits[..len]).expect("digits are ASCII"));
    }
    if json {
        out.push(']');
    }
    out
}

const fn format(json: bool) -> Format {
    if json {
        Format::Jsonl
    } else {
        Format::Tsv
    }
}

/// A text from the traffic, escaped for `format` (TSV: `\\`, `\t`, `\n`, `\r`; JSON: a
/// string literal).
#[inline(always)]
fn put_escaped(line: &mut Line, format: Format, s: &str) {
    // A fold without an early exit: the compiler checks many bytes at a time.
    let plain = match format {
        Format::Tsv => !s.bytes().fold(false, |any, b| any | matches!(b, b'\\' | b'\t' | b'\n' | b'\r')),
        Format::Jsonl => !s.bytes().fold(false, |any, b| any | (b < 0x20) | (b == b'"') | (b == b'\\')),
    };
    // Names from the traffic rarely need escaping: then they are copied as they are.
    if plain {
        let quote: &[u8] = if format == Format::Jsonl { b"\"" } else { b"" };
        line.put_text(quote, s);
    } else {
        line.put_text(b"", &escaped(format, s));
    }
}

/// `s` escaped for `format` (out of line: the line being written stays in registers).
#[cold]
#[inline(never)]
fn escaped(format: Format, s: &str) -> String {
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
    escaped
}

/// Writes `ns` nanoseconds at the start of `out` as milliseconds with three decimals, rounded
/// half up to the microsecond.
#[inline(always)]
fn write_ms(out: &mut [u8], ns: u64) -> usize {
    // Over half of them are zero (events that did not happen).
    if ns < 500 {
        out[..5].copy_from_slice(b"0.000");
        return 5;
    }
    let us = ns / 1000 + u64::from(ns % 1000 >= 500);
    // `text::decimal` with the divisions by constants.
    let (ms, frac) = (us / 1000, (us % 1000) as usize);
    let len = text::write(out, ms);
    let [point, tens @ .., last] = &mut out[len..len + 4] else { unreachable!("four bytes") };
    *point = b'.';
    tens.copy_from_slice(&text::PAIRS[frac / 10]);
    *last = b'0' + (frac % 10) as u8;
    len + 4
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

    fn written(put: impl Fn(&mut Line)) -> String {
        let mut buf = Vec::new();
        let len = text::write_line(&mut buf, SHARE, put);
        String::from_utf8(buf[..len].to_vec()).unwrap()
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

    /// A record with a value of every kind.
    struct Sample(u64, &'static str);

    impl Logged for Sample {
        fn columns<V: Visit<Sample>>(v: &mut V) {
            v.column("n", Kind::Count, |r| Value::Int(r.0));
            v.column("ms", Kind::Duration, |r| Value::Ms(r.0 * 1_000_777));
            v.column("ip", Kind::Address, |r| Value::Ip([10, 0, 0, r.0 as u8].into()));
            v.column("text", Kind::Label, |_| Value::Text("tls"));
            v.column("str", Kind::Label, |r| Value::Str(r.1));
            v.column("owned", Kind::Label, |r| Value::Owned(r.1.repeat(2)));
            v.column("flag", Kind::Flag, |r| Value::Bool(r.0 % 2 == 1));
            v.column("missing", Kind::Label, |_| Value::Missing);
            v.column("none", Kind::Duration, |_| Value::NoSample);
            v.column("zero", Kind::Count, |_| Value::NoSample);
        }
    }

    /// The writer generated from a log's columns and the one reading them from the list
    /// write the same lines.
    #[test]
    fn generated_and_listed_lines_agree() {
        for format in [Format::Tsv, Format::Jsonl] {
            let (generated, listed) = (LineFormat::of(format, false), LineFormat::new(format, &collect::<Sample>()));
            const LONG: &str = "a name longer than the forty-seven bytes a value may take otherwise";
            for sample in [Sample(0, ""), Sample(7, "a\tb\"c"), Sample(123_456_789, LONG)] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                assert_eq!(generated.format(&mut a, &sample), listed.format(&mut b, &sample));
            }
        }
        let mut buf = Vec::new();
        let line = LineFormat::of(Format::Tsv, false).format(&mut buf, &Sample(7, "a\tb")).to_vec();
        assert_eq!(String::from_utf8(line).unwrap(), "7\t7.005\t10.0.0.7\ttls\ta\\tb\ta\\tba\\tb\t1\t-\t0.000\t0\n");
        let line = LineFormat::of(Format::Jsonl, false).format(&mut buf, &Sample(0, "x")).to_vec();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"n\":0,\"ms\":0.000,\"ip\":\"10.0.0.0\",\"text\":\"tls\",\"str\":\"x\",\"owned\":\"xx\",\"flag\":false,\
             \"missing\":null,\"none\":null,\"zero\":null}\n"
        );
    }

    #[test]
    fn extra_columns_follow_the_generated_ones() {
        let extra = || {
            vec![
                Column { name: "mean", kind: Kind::Float, value: |r: &Sample| Value::Float(r.0 as f64 / 4.0) },
                Column { name: "splt", kind: Kind::List, value: |r: &Sample| Value::List(vec![r.0 as i64, -1]) },
            ]
        };
        let mut all = collect::<Sample>();
        all.extend(extra());
        for format in [Format::Tsv, Format::Jsonl] {
            let (generated, listed) = (LineFormat::of_with(format, false, extra()), LineFormat::new(format, &all));
            let (mut a, mut b) = (Vec::new(), Vec::new());
            assert_eq!(generated.format(&mut a, &Sample(7, "x")), listed.format(&mut b, &Sample(7, "x")));
        }
        let mut buf = Vec::new();
        let line = LineFormat::of_with(Format::Tsv, false, extra()).format(&mut buf, &Sample(7, "x")).to_vec();
        assert!(String::from_utf8(line).unwrap().ends_with("\t1.75\t7,-1\n"));
        let line = LineFormat::of_with(Format::Jsonl, false, extra()).format(&mut buf, &Sample(7, "x")).to_vec();
        assert!(String::from_utf8(line).unwrap().ends_with(",\"mean\":1.75,\"splt\":[7,-1]}\n"));
    }

    #[test]
    fn lists_and_floats_as_text() {
        assert_eq!(
            list_text(&[0, -1, i64::MIN, 123, i64::MAX], false),
            "0,-1,-9223372036854775808,123,9223372036854775807"
        );
        assert_eq!(list_text(&[], true), "[]");
        assert_eq!(
            (float_text(52.5, false), float_text(0.0, true), float_text(f64::NAN, true)),
            ("52.5".into(), "0".into(), "null".into())
        );
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
