//! What the engine side publishes: one whole, immutable view of a run. The server only reads
//! snapshots; a new one replaces the old whole, so a request never sees half an update.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use sonde_output::read::{self, TsvReader};
use sonde_output::Format;
use sonde_types::table::{Cell as TableCell, Rows};
pub use sonde_types::{DefinitionSummary, TrafficRow};

/// Everything the API serves, as of one moment of the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    pub status: Status,
    /// The run's summary.json value (`null` while a live run has none yet).
    pub summary: Value,
    pub intervals: Intervals,
    pub tables: TableFiles,
    pub flows: Flows,
    pub definitions: Definitions,
    /// A live run's traffic in short bins (empty for a finished offline run).
    pub live: LiveSeries,
    /// The whole run's traffic and flows by protocol and direction, when `intervals` holds only
    /// the recent ones (a live run); empty: `intervals` is the whole run.
    pub totals: Vec<TrafficRow>,
    /// A merged view's probes (`sonde serve --merged`), by name; empty for one run.
    pub probes: Vec<ProbeRow>,
}

/// One probe as the merged view knows it (docs/merged.md): the newest interval it published, when
/// the merge job read it, and how its lag compares with the other probes'.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProbeRow {
    pub probe: String,
    /// The newest interval the probe published (packet time, Unix seconds).
    pub last_start_s: f64,
    pub last_end_s: f64,
    /// The merge job's wall clock when it read that interval (Unix seconds).
    pub seen_at_s: f64,
    /// The probe's interval length.
    pub interval_s: f64,
    /// `seen_at_s - last_end_s`.
    pub lag_s: f64,
    /// `lag_s` less the median lag of the probes seen in the last minute.
    pub offset_s: f64,
    /// `|offset_s| > interval_s`: the probe's clock is off from the others by more than an
    /// interval.
    pub clock_off: bool,
    /// The merge job's micro-batch this row came from.
    pub batch: i64,
}

/// What `/api/status` says of a merged view: where it reads, what it holds, which probes are
/// flagged, and how reading went.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MergedStatus {
    /// The directory read (the merge job's output).
    pub dir: String,
    /// Probes in the probes table.
    pub probes: usize,
    /// The probes whose clock is off (`clock_off`), by name.
    pub clock_off: Vec<String>,
    /// Intervals kept (at most `max_intervals`, the newest).
    pub intervals: usize,
    pub max_intervals: usize,
    /// The newest interval's bounds (Unix seconds), `null` before any.
    pub newest_start_s: Option<f64>,
    pub newest_end_s: Option<f64>,
    /// Parquet files read whole so far.
    pub files_read: u64,
    /// Files that could not be read at the latest reload (skipped, tried again at the next).
    pub files_unreadable: u64,
    /// Failed reads so far (a file failing at three reloads counts three).
    pub read_failures: u64,
    /// The latest failure: the file and why.
    pub last_failure: Option<String>,
    /// Rows left out so far: an interval older than the kept ones, a probe beyond the probes
    /// limit, or a row with a null or a non-finite key.
    pub rows_dropped: u64,
    /// Intervals of the flow tables (`hosts/`, `pairs/`) kept.
    pub flow_intervals: usize,
    /// Hosts, and host pairs, kept per flow interval at most (the largest by bytes).
    pub max_table_rows: usize,
    /// Host and pair rows that bound let go (evicted or refused) so far.
    pub table_rows_let_go: u64,
    /// Reloads done, and the wall clock of the latest (Unix seconds).
    pub reloads: u64,
    pub reloaded_unix_s: f64,
}

/// Traffic per direction in short bins of packet time, the newest last: what the live
/// throughput chart sums up at the resolution the viewer picks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveSeries {
    /// Bin length in seconds (0 when the run has none).
    pub bin_s: f64,
    pub bins: std::collections::VecDeque<TrafficBin>,
}

/// One bin: its start and, by direction (in, out, loc, ext), packets and IP bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TrafficBin {
    pub start_s: f64,
    pub packets: [u64; 4],
    pub bytes: [u64; 4],
}

/// Whether the engine is still feeding packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    #[default]
    Running,
    Finished,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    pub state: Phase,
    /// The trace or interface read.
    pub input: String,
    /// Wall-clock start of the run (Unix seconds): metadata only, never used in the analysis.
    pub started_unix_s: f64,
    pub packets: u64,
    pub bytes: u64,
    /// Wall-clock seconds the run took (or has taken so far).
    pub elapsed_s: f64,
    /// Packet time of the first and latest packet (Unix seconds), `null` before any.
    pub first_packet_s: Option<f64>,
    pub last_packet_s: Option<f64>,
    /// How many internal networks (`--internal`, `--internal-file`) the run classifies traffic
    /// with, as it started: with none, every packet is `ext` and there is no in/out split (the
    /// dashboard then draws one "all" series). 0 on a merged view (each probe has its own).
    pub internal_networks: usize,
    /// Present only when the server shows a merged view of several probes (`sonde serve
    /// --merged`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedStatus>,
}

/// The monitoring intervals (sonde-stats' `Report`), oldest first.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Intervals {
    /// Interval length in seconds; 0 when monitoring was off.
    pub interval_s: f64,
    pub items: Vec<IntervalData>,
    /// Per interval, the histograms of its distributions (same order as `items`).
    #[serde(skip)]
    pub histograms: Vec<IntervalHistograms>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct IntervalData {
    /// Start time ÷ interval length.
    pub index: u64,
    pub start_s: f64,
    pub end_s: f64,
    pub traffic: Vec<TrafficRow>,
    pub quantiles: Vec<QuantileRow>,
}

/// One distribution's summary, values in `unit` (as quantiles.tsv writes them).
#[derive(Debug, Clone, Default, Serialize)]
pub struct QuantileRow {
    pub metric: String,
    pub dir: String,
    pub net: String,
    pub unit: String,
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct IntervalHistograms {
    pub index: u64,
    pub start_s: f64,
    pub histograms: Vec<HistogramRow>,
}

/// One distribution's bins as `[lo, hi, count]`, bounds in `unit`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HistogramRow {
    pub metric: String,
    pub dir: String,
    pub net: String,
    pub unit: String,
    pub bins: Vec<[f64; 3]>,
}

/// Rows of named columns. The run's own tables (intervals' RMON2 tables, definitions' counts)
/// are kept typed, as sonde-stats and sonde-define made them, and written as JSON when served.
/// A flow log is kept as its lines of text (read by sonde-output's reader, the one reader of what
/// it writes) and read into JSON values (numbers stay numbers) only when served: a flow log held
/// as values took about eight times the memory of its lines.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<String>,
    rows: Body,
}

#[derive(Debug, Clone)]
enum Body {
    /// A flow log's TSV lines, as sonde-output's reader holds them.
    Text(read::Table),
    /// A flow log's JSON lines (`--format jsonl`), each an object whose keys are the columns.
    Json(Vec<Arc<str>>),
    Typed(Rows),
}

impl Default for Body {
    fn default() -> Body {
        Body::Json(Vec::new())
    }
}

impl From<Rows> for Table {
    fn from(rows: Rows) -> Table {
        Table { columns: rows.columns.iter().map(|c| c.name.to_string()).collect(), rows: Body::Typed(rows) }
    }
}

impl Table {
    /// Reads a TSV text with a header line; a field that reads as a number becomes one, `-`
    /// and empty become `null`. The text is the run's own (a file it wrote, lines it holds):
    /// a line with the wrong number of fields is left out rather than failing the whole view.
    pub fn from_tsv(text: &str) -> Table {
        let Ok(tsv) = TsvReader::new(Path::new("-"), text.as_bytes()) else { return Table::default() };
        let table = read::Table::from_tsv_lenient(tsv);
        Table { columns: table.columns.clone(), rows: Body::Text(table) }
    }

    /// Reads JSON lines (one object per line); the columns are the first object's keys. A line
    /// that is not an object is skipped.
    pub fn from_jsonl(text: &str) -> Table {
        let mut columns: Vec<String> = Vec::new();
        let mut rows = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line) else { continue };
            if columns.is_empty() {
                columns = map.keys().cloned().collect();
            }
            rows.push(Arc::from(line));
        }
        Table { columns, rows: Body::Json(rows) }
    }

    /// A flow log's lines held elsewhere (the live view's), shared rather than copied: in
    /// `format`, each without its line end. TSV lines take `header`'s columns (the log's first
    /// line; a line with another number of fields is left out); JSON lines the first line's
    /// keys, the lines being the run's own objects.
    pub fn from_lines<'r>(format: Format, header: &str, lines: impl IntoIterator<Item = &'r Arc<str>>) -> Table {
        match format {
            Format::Tsv => {
                let columns: Vec<String> = header.trim_end().split('\t').map(str::to_owned).collect();
                let table = read::Table::from_rows(columns, lines);
                Table { columns: table.columns.clone(), rows: Body::Text(table) }
            }
            Format::Jsonl => {
                let rows: Vec<Arc<str>> = lines.into_iter().cloned().collect();
                let columns = match rows.first().map(|l| serde_json::from_str::<Value>(l)) {
                    Some(Ok(Value::Object(map))) => map.keys().cloned().collect(),
                    _ => Vec::new(),
                };
                Table { columns, rows: Body::Json(rows) }
            }
        }
    }

    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    pub fn len(&self) -> usize {
        match &self.rows {
            Body::Text(table) => table.len(),
            Body::Json(lines) => lines.len(),
            Body::Typed(rows) => rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Field `col` of row `row`, as a value.
    pub fn cell(&self, row: usize, col: usize) -> Value {
        match &self.rows {
            Body::Text(table) => table.cell(row, col).map_or(Value::Null, cell),
            Body::Json(lines) => self.json_row(lines, row).get(col).cloned().unwrap_or(Value::Null),
            Body::Typed(rows) => rows.row(row).and_then(|r| r.get(col)).map_or(Value::Null, json),
        }
    }

    /// Row `row` as values.
    pub fn row(&self, row: usize) -> Vec<Value> {
        match &self.rows {
            Body::Text(table) => table.row(row).map_or_else(Vec::new, |r| r.map(cell).collect()),
            Body::Json(lines) => self.json_row(lines, row),
            Body::Typed(rows) => rows.row(row).map_or_else(Vec::new, |r| r.iter().map(json).collect()),
        }
    }

    /// Row `row` of JSON lines as values in column order (a key a line lacks: null).
    fn json_row(&self, lines: &[Arc<str>], row: usize) -> Vec<Value> {
        let Some(Ok(Value::Object(map))) = lines.get(row).map(|l| serde_json::from_str::<Value>(l)) else {
            return Vec::new();
        };
        self.columns.iter().map(|c| map.get(c).cloned().unwrap_or(Value::Null)).collect()
    }

    /// The same columns with the rows `keep` says.
    pub fn filtered(&self, keep: impl Fn(&Table, usize) -> bool) -> Table {
        let mut kept = (0..self.len()).map(|i| keep(self, i));
        let rows = match &self.rows {
            Body::Text(table) => Body::Text(table.filtered(|_| kept.next() == Some(true))),
            Body::Json(lines) => Body::Json(lines.iter().filter(|_| kept.next() == Some(true)).cloned().collect()),
            Body::Typed(rows) => Body::Typed(rows.filtered(|_| kept.next() == Some(true))),
        };
        Table { columns: self.columns.clone(), rows }
    }
}

impl Serialize for Table {
    /// `{"columns": [...], "rows": [[...], ...]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Table", 2)?;
        st.serialize_field("columns", &self.columns)?;
        match &self.rows {
            Body::Text(_) | Body::Json(_) => {
                let rows: Vec<Vec<Value>> = (0..self.len()).map(|i| self.row(i)).collect();
                st.serialize_field("rows", &rows)?;
            }
            Body::Typed(rows) => st.serialize_field("rows", &TypedRows(rows))?,
        }
        st.end()
    }
}

/// Typed rows written as JSON arrays, cell by cell, without building values first.
struct TypedRows<'a>(&'a Rows);

impl Serialize for TypedRows<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for row in self.0.iter() {
            seq.serialize_element(&TypedRow(row))?;
        }
        seq.end()
    }
}

struct TypedRow<'a>(&'a [TableCell<'static>]);

impl Serialize for TypedRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for c in self.0 {
            match c {
                TableCell::Null => seq.serialize_element(&())?,
                TableCell::Count(n) => seq.serialize_element(n)?,
                TableCell::Flag(b) => seq.serialize_element(b)?,
                TableCell::Decimal(d) if d.decimals == 0 => seq.serialize_element(&d.units)?,
                TableCell::Decimal(d) => seq.serialize_element(&d.to_f64())?,
                TableCell::Address(ip) => seq.serialize_element(&ip.to_string())?,
                TableCell::Text(t) => seq.serialize_element(t.as_ref())?,
            }
        }
        seq.end()
    }
}

/// A typed cell as a JSON value: a count or a decimal a number (seconds for a time, ms for a
/// span), a flag a boolean, an address or a name a string, no value `null`.
fn json(c: &TableCell<'_>) -> Value {
    match c {
        TableCell::Null => Value::Null,
        TableCell::Count(n) => Value::from(*n),
        TableCell::Flag(b) => Value::Bool(*b),
        TableCell::Decimal(d) if d.decimals == 0 => Value::from(d.units),
        TableCell::Decimal(d) => Value::from(d.to_f64()),
        TableCell::Address(ip) => Value::from(ip.to_string()),
        TableCell::Text(t) => Value::from(t.as_ref()),
    }
}

/// A JSON value as a TSV field (the flow logs' values hold no tab).
fn cell(text: &str) -> Value {
    match text {
        "" | "-" => return Value::Null,
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(n) = text.parse::<u64>() {
        return Value::from(n);
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => Value::from(f),
        _ => Value::from(text),
    }
}

/// The RMON2-style tables of every interval as the table files hold them (empty when the run
/// kept none): the rows of hosts.tsv, matrix.tsv, protocols.tsv and top.tsv, not sonde-stats'
/// `Tables` (one interval's bounded maps, from which those rows are made).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableFiles {
    pub hosts: Table,
    pub matrix: Table,
    pub protocols: Table,
    pub top: Table,
}

/// The flow logs, one table per protocol.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Flows {
    pub tcp: Table,
    pub udp: Table,
}

/// The flow definitions and what they counted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Definitions {
    /// The set's version (every change bumps it; 0 when the run had no definitions).
    pub version: u64,
    pub items: Vec<DefinitionSummary>,
    /// definitions.tsv: per interval, definition and FID, packets and bytes.
    pub counts: Table,
    /// Per association: its latest samples, for the RTT phase plot.
    pub associations: Vec<AssociationSamples>,
}

/// An association's latest samples as `[answered_s, gap_ms]`, oldest first.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AssociationSamples {
    pub name: String,
    pub samples: Vec<[f64; 2]>,
}

impl AssociationSamples {
    /// From the counter's (time answered, gap) pairs in ns.
    pub fn from_ns(name: String, samples: &[(u64, u64)]) -> AssociationSamples {
        AssociationSamples { name, samples: samples.iter().map(|&(t, g)| [t as f64 / 1e9, g as f64 / 1e6]).collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonde_types::table::Cell;

    #[test]
    fn tsv_cells_keep_numbers_and_nulls() {
        let t = Table::from_tsv("a\tb\tc\td\n1\t2.5\t-\t10.0.0.1\n\n");
        assert_eq!(t.columns, ["a", "b", "c", "d"]);
        assert_eq!(t.len(), 1);
        assert_eq!(t.row(0), vec![Value::from(1u64), Value::from(2.5), Value::Null, Value::from("10.0.0.1")]);
        assert_eq!(t.cell(0, 3), Value::from("10.0.0.1"));
        assert_eq!(t.cell(0, 9), Value::Null);
        assert_eq!(t.column("c"), Some(2));
    }

    /// The live view's tables share the lines it keeps: no copy per table, a line with the
    /// wrong number of fields left out, JSON lines' columns the first line's keys.
    #[test]
    fn tables_of_kept_lines_share_them() {
        let lines: Vec<Arc<str>> = ["1\t2.5\t-", "3\t4", "5\t6\t7"].map(Arc::from).into();
        let t = Table::from_lines(Format::Tsv, "a\tb\tc\n", &lines);
        assert_eq!(t.columns, ["a", "b", "c"]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.row(1), vec![Value::from(5u64), Value::from(6u64), Value::from(7u64)]);
        assert_eq!(Arc::strong_count(&lines[0]), 2, "the table holds the line itself, not a copy");
        assert_eq!(Arc::strong_count(&lines[1]), 1, "the short line is left out");
        let filtered = t.filtered(|t, i| t.cell(i, 0) == 5u64);
        assert_eq!((filtered.len(), Arc::strong_count(&lines[2])), (1, 3));

        let json: Vec<Arc<str>> = [r#"{"a":1,"b":"x"}"#, r#"{"b":"y","a":2}"#].map(Arc::from).into();
        let t = Table::from_lines(Format::Jsonl, "", &json);
        assert_eq!(t.columns, ["a", "b"]);
        assert_eq!(t.row(1), vec![Value::from(2u64), Value::from("y")]);
        assert!(Table::from_lines(Format::Jsonl, "", &[]).is_empty());
    }

    /// Typed rows are served with their types, not as text read back: a flag is a boolean, a
    /// name that looks like a number stays a name, a time is seconds.
    #[test]
    fn typed_rows_are_served_as_typed_json() {
        use sonde_types::table::{Column, Decimal, Kind, Table as Typed};
        const COLUMNS: &[Column] = &[
            Column::new("start", Kind::Time),
            Column::new("addr", Kind::Address),
            Column::new("internal", Kind::Flag),
            Column::new("fid", Kind::Label),
            Column::new("packets", Kind::Count),
        ];
        let typed = Typed::new(COLUMNS, |row| {
            let start = Cell::Decimal(Decimal::seconds(100_500_000_000));
            row(&[start, Cell::Address([10, 0, 0, 1].into()), Cell::Flag(true), Cell::text("80"), Cell::Count(7)]);
            row(&[
                Cell::Decimal(Decimal::seconds(99_000_000_000)),
                Cell::text("overflow"),
                Cell::Null,
                { Cell::text("-1") },
                Cell::Count(2),
            ]);
        });
        let t = Table::from(typed.collect());
        assert_eq!((t.columns[2].as_str(), t.len(), t.column("fid")), ("internal", 2, Some(3)));
        let first =
            vec![Value::from(100.5), Value::from("10.0.0.1"), Value::Bool(true), Value::from("80"), Value::from(7u64)];
        assert_eq!(t.row(0), first);
        assert_eq!(t.cell(1, 2), Value::Null);
        let later = t.filtered(|t, i| t.cell(i, 0).as_f64().is_some_and(|s| s >= 100.0));
        assert_eq!(later.len(), 1);
        assert_eq!(serde_json::to_value(&later).unwrap(), serde_json::json!({"columns": t.columns, "rows": [first]}));
    }

    #[test]
    fn jsonl_rows_follow_the_first_objects_keys() {
        let t = Table::from_jsonl("{\"a\":1,\"b\":\"x\",\"c\":true}\nnot json\n{\"b\":\"y\"}\n");
        assert_eq!(t.columns, ["a", "b", "c"]);
        assert_eq!(t.row(0), vec![Value::from(1u64), Value::from("x"), Value::Bool(true)]);
        assert_eq!(t.row(1), vec![Value::Null, Value::from("y"), Value::Null]);
    }
}
