//! Tables as typed rows: the interval, RMON2-table and definition outputs are made once as
//! [`Cell`]s under declared [`Column`]s, and every format renders those cells (TSV here; the
//! typed Parquet/Arrow tables in sonde-arrow; JSON in sonde-http). No format reads another's
//! text back.
//!
//! A number with decimals is a [`Decimal`]: the value every format carries, exactly (the TSV
//! writes its digits by integer arithmetic, a typed output converts it without rounding), so the
//! text and the typed outputs cannot disagree.
//!
//! ```
//! use sonde_types::table::{Cell, Column, Decimal, Kind, Table};
//! const COLUMNS: &[Column] = &[Column::new("start", Kind::Time), Column::new("packets", Kind::Count)];
//! let table = Table::new(COLUMNS, |row| {
//!     row(&[Cell::Decimal(Decimal::seconds(1_500_000_000_123_456_789)), Cell::Count(7)]);
//!     row(&[Cell::Null, Cell::Count(0)]);
//! });
//! assert_eq!(table.tsv(), "start\tpackets\n1500000000.123456\t7\n-\t0\n");
//! ```

use crate::text::{self, Line, SHARE};
use std::borrow::Cow;
use std::net::IpAddr;

/// What a column holds: one Arrow type each in the typed outputs (the flow logs' columns use
/// the same kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An unsigned integer: a count, a port, a rank.
    Count,
    /// An IP address (text).
    Address,
    /// A name from a small set (dictionary-encoded).
    Label,
    Flag,
    /// A point in time, ns since the Unix epoch (UTC); a table's cells hold seconds.
    Time,
    /// A span of time in ns; a table's cells hold milliseconds.
    Duration,
    /// A statistic in its own unit (a quantile, a histogram bound).
    Float,
    /// A list of signed integers (the flow features' SPLT): Arrow's list of int64; comma-separated
    /// in TSV, an array in JSON.
    List,
}

/// A column of a table: its name (the TSV header's) and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
}

impl Column {
    pub const fn new(name: &'static str, kind: Kind) -> Column {
        Column { name, kind }
    }
}

/// A decimal number: `units` × 10^-`decimals`, exactly (`decimals` ≤ 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decimal {
    pub units: u64,
    pub decimals: u8,
}

const POW10: [u64; 10] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];

impl Decimal {
    pub const fn new(units: u64, decimals: u8) -> Decimal {
        Decimal { units, decimals }
    }

    /// Packet time (ns since the epoch) in seconds with microseconds, as every interval and
    /// definition file writes it: the nanoseconds below the microsecond are dropped.
    pub const fn seconds(ns: u64) -> Decimal {
        Decimal { units: ns / 1_000, decimals: 6 }
    }

    /// Nanoseconds in milliseconds with six decimals, exactly.
    pub const fn ms(ns: u64) -> Decimal {
        Decimal { units: ns, decimals: 6 }
    }

    /// `x` with `decimals` decimals, rounded as `format!("{x:.decimals$}")` rounds it (half to
    /// even, on the float's exact binary value); `None` for a negative, non-finite or too large
    /// `x`, or more than 9 decimals.
    pub fn of_f64(x: f64, decimals: u8) -> Option<Decimal> {
        if !x.is_finite() || x.is_sign_negative() || decimals > 9 {
            return None;
        }
        let bits = x.to_bits();
        let (exp, fraction) = ((bits >> 52) as i32, bits & ((1 << 52) - 1));
        // x = mantissa × 2^e, exactly.
        let (mantissa, e) = if exp == 0 { (fraction, -1074) } else { (fraction | 1 << 52, exp - 1075) };
        let scaled = u128::from(mantissa) * u128::from(POW10[usize::from(decimals)]);
        let units = if e >= 0 {
            if scaled.leading_zeros() < e as u32 {
                return None;
            }
            scaled << e
        } else if -e >= 128 {
            0 // below 2^-127 of a unit: far from half of one
        } else {
            let shift = (-e) as u32;
            let (whole, rest, half) = (scaled >> shift, scaled & ((1 << shift) - 1), 1u128 << (shift - 1));
            whole + u128::from(rest > half || (rest == half && whole & 1 == 1))
        };
        Some(Decimal { units: u64::try_from(units).ok()?, decimals })
    }

    /// The nearest float (exact while `units` < 2^53: what reading the text gives).
    pub fn to_f64(self) -> f64 {
        self.units as f64 / POW10[usize::from(self.decimals.min(9))] as f64
    }

    /// The value in units of 10^-`decimals` (truncated when it has more): seconds to ns with 9,
    /// ms to ns with 6. `None` past `u64`.
    pub fn scaled(self, decimals: u8) -> Option<u64> {
        let (have, want) = (usize::from(self.decimals.min(9)), usize::from(decimals.min(9)));
        if want >= have {
            self.units.checked_mul(POW10[want - have])
        } else {
            Some(self.units / POW10[have - want])
        }
    }

    /// Writes the digits (`12.500`, `7`).
    pub fn write(self, out: &mut String) {
        let mut digits = [0; text::DECIMAL_MAX];
        let len = self.write_bytes(&mut digits);
        out.push_str(std::str::from_utf8(&digits[..len]).expect("digits are ASCII"));
    }

    /// Writes the digits at the start of `out` (room for [`text::DECIMAL_MAX`] bytes); returns
    /// how many.
    #[inline]
    fn write_bytes(self, out: &mut [u8]) -> usize {
        text::decimal(out, self.units, usize::from(self.decimals.min(9)))
    }
}

/// One value of a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    /// No value: `-` in TSV, null in JSON and the typed outputs.
    Null,
    Count(u64),
    Flag(bool),
    /// A time (seconds), a span (ms) or a statistic, as its column's kind says.
    Decimal(Decimal),
    Address(IpAddr),
    Text(Cow<'a, str>),
}

impl<'a> Cell<'a> {
    pub fn text(text: &'a str) -> Cell<'a> {
        Cell::Text(Cow::Borrowed(text))
    }

    /// The same cell owning its text (for a table kept past its source).
    pub fn into_owned(self) -> Cell<'static> {
        match self {
            Cell::Null => Cell::Null,
            Cell::Count(n) => Cell::Count(n),
            Cell::Flag(b) => Cell::Flag(b),
            Cell::Decimal(d) => Cell::Decimal(d),
            Cell::Address(ip) => Cell::Address(ip),
            Cell::Text(t) => Cell::Text(Cow::Owned(t.into_owned())),
        }
    }

    /// Writes the cell as a TSV field: flags as `1`/`0`, addresses as `Display` writes them.
    /// Texts are written as they are (the tables' names and keys hold no tab or newline).
    #[inline(always)]
    fn put_tsv(&self, line: &mut Line) {
        match self {
            Cell::Null => line.put_byte(b'-'),
            Cell::Count(n) => line.put_u64(*n),
            Cell::Flag(b) => line.put_byte(if *b { b'1' } else { b'0' }),
            Cell::Decimal(d) => line.put_with(|out| d.write_bytes(out)),
            Cell::Address(ip) => line.put_with(|out| text::ip(out, *ip)),
            Cell::Text(t) => line.put_text(b"", t),
        }
    }
}

/// How a table's rows are made: called with a sink, it hands over each row's cells in the
/// columns' order.
type RowsFn<'a> = dyn Fn(&mut dyn FnMut(&[Cell<'_>])) + 'a;

/// One output's table: its columns, and its rows made on demand (nothing is kept: a format
/// takes each row as it comes).
pub struct Table<'a> {
    pub columns: &'static [Column],
    rows: Box<RowsFn<'a>>,
}

impl<'a> Table<'a> {
    pub fn new(columns: &'static [Column], rows: impl Fn(&mut dyn FnMut(&[Cell<'_>])) + 'a) -> Table<'a> {
        Table { columns, rows: Box::new(rows) }
    }

    /// Hands each row to `each`, in order.
    pub fn rows(&self, each: &mut dyn FnMut(&[Cell<'_>])) {
        (self.rows)(each);
    }

    /// The TSV text: the columns' names, then a line per row.
    pub fn tsv(&self) -> String {
        let mut out = String::new();
        self.write_tsv(&mut out);
        out
    }

    pub fn write_tsv(&self, out: &mut String) {
        // The rows are written as bytes, each in a scratch line with room for every cell, and
        // the whole text is made a `String` once (every cell writes UTF-8).
        let mut bytes = std::mem::take(out).into_bytes();
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                bytes.push(b'\t');
            }
            bytes.extend_from_slice(c.name.as_bytes());
        }
        bytes.push(b'\n');
        let width = self.columns.len();
        let room = width * (SHARE + 1);
        let mut scratch = Vec::new();
        // The decimals a row starts with (an interval's start and end, on every row of that
        // interval) and where the row above had them written, tabs included: when they are
        // the same, that text is copied rather than written again.
        let mut lead: Vec<Decimal> = Vec::new();
        let mut lead_text = 0..0;
        self.rows(&mut |cells| {
            debug_assert_eq!(cells.len(), width, "a row of {width} columns");
            // Not the last cell: its tab becomes the newline.
            let leading = cells[..width.saturating_sub(1)].iter().take_while(|c| matches!(c, Cell::Decimal(_)));
            let n = leading.clone().count();
            let same = n > 0 && n == lead.len() && leading.zip(&lead).all(|(c, d)| *c == Cell::Decimal(*d));
            if !same {
                lead.clear();
                lead.extend(cells[..n].iter().filter_map(|c| if let Cell::Decimal(d) = c { Some(*d) } else { None }));
            }
            let mut lead_len = 0;
            let len = text::write_line(&mut scratch, room, |line| {
                let rest = if same {
                    line.put(&bytes[lead_text.clone()]);
                    &cells[n..]
                } else {
                    cells
                };
                for (i, cell) in rest.iter().enumerate() {
                    cell.put_tsv(line);
                    line.put_byte(b'\t');
                    if !same && i + 1 == n {
                        lead_len = line.len();
                    }
                }
                if width == 0 {
                    line.put_byte(b'\n');
                } else {
                    line.set_last(b'\n');
                }
            });
            if !same {
                lead_text = bytes.len()..bytes.len() + lead_len;
            }
            bytes.extend_from_slice(&scratch[..len]);
        });
        *out = String::from_utf8(bytes).expect("every cell writes UTF-8");
    }
}

impl Table<'_> {
    /// The rows kept, each cell owning its text.
    pub fn collect(&self) -> Rows {
        let mut cells = Vec::new();
        self.rows(&mut |row| cells.extend(row.iter().cloned().map(Cell::into_owned)));
        Rows { columns: self.columns, cells }
    }
}

/// A table's rows kept: what outlives the source they were made from (a live view's copy of
/// the definitions' counts, the HTTP view's tables). One vector of cells, row after row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    pub columns: &'static [Column],
    cells: Vec<Cell<'static>>,
}

impl Rows {
    pub fn len(&self) -> usize {
        self.cells.len().checked_div(self.columns.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Where column `name` is.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &[Cell<'static>]> {
        self.cells.chunks_exact(self.columns.len().max(1))
    }

    /// Row `i`'s cells.
    pub fn row(&self, i: usize) -> Option<&[Cell<'static>]> {
        let width = self.columns.len();
        self.cells.get(i * width..(i + 1) * width).filter(|_| width > 0)
    }

    /// The rows `keep` keeps, in order.
    pub fn filtered(&self, mut keep: impl FnMut(&[Cell<'static>]) -> bool) -> Rows {
        let cells = self.iter().filter(|row| keep(row)).flatten().cloned().collect();
        Rows { columns: self.columns, cells }
    }
}

impl std::fmt::Debug for Table<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("columns", &self.columns).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsv(cell: Cell<'_>) -> String {
        let mut buf = Vec::new();
        let len = text::write_line(&mut buf, SHARE, |line| cell.put_tsv(line));
        String::from_utf8(buf[..len].to_vec()).unwrap()
    }

    #[test]
    fn cells_are_written_as_the_tsv_files_always_wrote_them() {
        for text in ["0.0.0.0", "10.0.0.1", "192.168.100.255", "255.255.255.255", "::", "2001:db8::1", "::ffff:1.2.3.4"]
        {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(tsv(Cell::Address(ip)), ip.to_string());
        }
        assert_eq!(tsv(Cell::Count(u64::MAX)), u64::MAX.to_string());
        assert_eq!(
            (tsv(Cell::Flag(true)), tsv(Cell::Flag(false)), tsv(Cell::Null)),
            ("1".into(), "0".into(), "-".into())
        );
        assert_eq!(tsv(Cell::Decimal(Decimal::seconds(1_700_000_000_123_456_789))), "1700000000.123456");
        assert_eq!(tsv(Cell::Decimal(Decimal::seconds(0))), "0.000000");
        assert_eq!(tsv(Cell::Decimal(Decimal::new(1_700_000_300_123_456_789, 9))), "1700000300.123456789");
        assert_eq!(tsv(Cell::Decimal(Decimal::ms(1_234_567))), "1.234567");
        assert_eq!(tsv(Cell::Decimal(Decimal::new(5, 3))), "0.005");
        assert_eq!(tsv(Cell::Decimal(Decimal::new(42, 0))), "42");
        assert_eq!(tsv(Cell::Decimal(Decimal::new(u64::MAX, 9))), "18446744073.709551615");
    }

    /// `of_f64` gives the digits `format!` writes, ties and all.
    #[test]
    fn decimals_of_floats_round_as_format_does() {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut values = vec![0.0, 0.5, 1.5, 2.5, 0.25, 0.125, 5e-7, 1e-300, f64::MIN_POSITIVE, 4.5e15, 1.8e13];
        for _ in 0..20_000 {
            let r = next();
            // Ties (k/2^n), small integers over powers of ten, and arbitrary floats.
            values.push((r % 100_000) as f64 / (1u64 << (r >> 60)) as f64);
            values.push((r % 1_000_000_007) as f64 / 1e6);
            values.push(f64::from_bits(r >> 2));
        }
        for v in values {
            for d in [0, 3, 4, 6, 9] {
                let want = format!("{v:.*}", usize::from(d));
                let got = Decimal::of_f64(v, d).map(|dec| tsv(Cell::Decimal(dec)));
                match got {
                    Some(got) => assert_eq!(got, want, "{v:e} with {d} decimals"),
                    // Only past u64 units.
                    None => assert!(v * 10f64.powi(d.into()) >= 1.8e19, "{v:e} with {d} decimals"),
                }
            }
        }
        for bad in [-1.0, -0.0, f64::NAN, f64::INFINITY] {
            assert_eq!(Decimal::of_f64(bad, 6), None, "{bad}");
        }
    }

    #[test]
    fn decimals_convert_exactly() {
        let t = Decimal::seconds(1_431_969_641_947_863_123);
        assert_eq!(t.scaled(9), Some(1_431_969_641_947_863_000));
        assert_eq!(Decimal::new(5, 3).scaled(6), Some(5_000));
        assert_eq!(Decimal::new(1_234_567, 6).scaled(3), Some(1_234));
        assert_eq!(Decimal::new(u64::MAX, 0).scaled(9), None);
        assert_eq!(Decimal::ms(1_234_567).to_f64(), "1.234567".parse::<f64>().unwrap());
        assert_eq!(Decimal::new(12_345, 4).to_f64(), 1.2345);
    }

    #[test]
    fn a_table_writes_its_header_and_rows() {
        const COLUMNS: &[Column] = &[Column::new("addr", Kind::Address), Column::new("app", Kind::Label)];
        let name = String::from("tls");
        let t = Table::new(COLUMNS, |row| {
            row(&[Cell::Address([10, 0, 0, 1].into()), Cell::text(&name)]);
            row(&[Cell::text("overflow"), Cell::Null]);
        });
        assert_eq!(t.tsv(), "addr\tapp\n10.0.0.1\ttls\noverflow\t-\n");
        let kept = t.collect();
        assert_eq!((kept.len(), kept.column("app")), (2, Some(1)));
        assert_eq!(kept.row(1).unwrap(), [Cell::text("overflow"), Cell::Null]);
        assert_eq!(kept.row(2), None);
        let tls = kept.filtered(|row| row[1] == Cell::text("tls"));
        assert_eq!((tls.len(), &tls.iter().next().unwrap()[0]), (1, &Cell::Address([10, 0, 0, 1].into())));
        assert_eq!(Rows::default().len(), 0);
    }
}
