//! One Parquet file of the merge job's output read into typed rows (docs/merged.md, "Contract").
//!
//! Columns are found by name, so their order and any extra column do not matter; a column of a
//! narrower or wider type of the same kind (INT for LONG, LargeUtf8 for STRING) is widened or
//! narrowed losslessly, anything else is refused. A row with a null where the contract has a
//! value is left out and counted.

use std::fs::File;
use std::panic::AssertUnwindSafe;
use std::path::Path;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Float64Type, Int32Type, Int64Type};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The changelogs, each a directory of the merge job's output: the four of the counters and
/// distributions, and the flow query's two (`hosts/`, `pairs/`; docs/spark.md, "Flows across
/// probes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Changelog {
    Intervals,
    Quantiles,
    Histograms,
    Probes,
    Hosts,
    Pairs,
}

impl Changelog {
    pub const ALL: [Changelog; 6] = [
        Changelog::Intervals,
        Changelog::Quantiles,
        Changelog::Histograms,
        Changelog::Probes,
        Changelog::Hosts,
        Changelog::Pairs,
    ];

    /// The directory's name under the merged output.
    pub fn dir(self) -> &'static str {
        match self {
            Changelog::Intervals => "intervals",
            Changelog::Quantiles => "quantiles",
            Changelog::Histograms => "histograms",
            Changelog::Probes => "probes",
            Changelog::Hosts => "hosts",
            Changelog::Pairs => "pairs",
        }
    }
}

/// `OUT/intervals/`: one (start, proto, net)'s merged counters.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    pub start: f64,
    pub end: f64,
    pub proto: String,
    pub net: String,
    pub packets: i64,
    pub bytes: i64,
    pub flows_opened: i64,
    pub flows_closed: i64,
    pub flows_active: i64,
    pub probes: i32,
    pub batch: i64,
}

/// `OUT/quantiles/`: one (start, metric, dir, net)'s merged distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantileRow {
    pub start: f64,
    pub end: f64,
    pub metric: String,
    pub dir: String,
    pub net: String,
    pub unit: String,
    pub count: i64,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub probes: i32,
    pub batch: i64,
}

/// `OUT/histograms/`: one bin of one (start, metric, dir, net).
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramRow {
    pub start: f64,
    pub end: f64,
    pub metric: String,
    pub dir: String,
    pub net: String,
    pub bin_lo: f64,
    pub bin_hi: f64,
    pub count: i64,
    pub batch: i64,
}

/// `OUT/probes/`: one probe's newest interval and clock.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRow {
    pub probe: String,
    pub last_start: f64,
    pub last_end: f64,
    pub seen_at: f64,
    pub interval_s: f64,
    pub lag_s: f64,
    pub offset_s: f64,
    pub clock_off: bool,
    pub batch: i64,
}

/// `OUT/hosts/`: one (start, addr)'s merged flows: what the host received (`_in`) and sent
/// (`_out`), IP packets and bytes, and the flows it took part in, each flow charged to the
/// interval of its last packet.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRow {
    pub start: f64,
    pub end: f64,
    pub addr: String,
    pub pkts_in: i64,
    pub bytes_in: i64,
    pub pkts_out: i64,
    pub bytes_out: i64,
    pub flows: i64,
    pub batch: i64,
}

/// `OUT/pairs/`: one (start, src, dst)'s merged flows: what `src` sent `dst` (IP packets and
/// bytes) in the flows between them, and those flows.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRow {
    pub start: f64,
    pub end: f64,
    pub src: String,
    pub dst: String,
    pub packets: i64,
    pub bytes: i64,
    pub flows: i64,
    pub batch: i64,
}

/// A file's rows, of the changelog its directory names.
#[derive(Debug, Clone, PartialEq)]
pub enum Rows {
    Intervals(Vec<IntervalRow>),
    Quantiles(Vec<QuantileRow>),
    Histograms(Vec<HistogramRow>),
    Probes(Vec<ProbeRow>),
    Hosts(Vec<HostRow>),
    Pairs(Vec<PairRow>),
}

impl Rows {
    pub fn len(&self) -> usize {
        match self {
            Rows::Intervals(r) => r.len(),
            Rows::Quantiles(r) => r.len(),
            Rows::Histograms(r) => r.len(),
            Rows::Probes(r) => r.len(),
            Rows::Hosts(r) => r.len(),
            Rows::Pairs(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read: its rows, and how many it left out (a null where a value must be).
#[derive(Debug, Clone, PartialEq)]
pub struct FileRows {
    pub rows: Rows,
    pub nulls: u64,
}

/// Why a file could not be read: not (yet) a whole Parquet file, or not of the contract's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError(pub String);

sonde_types::message_error!(ReadError);

fn err(e: impl std::fmt::Display) -> ReadError {
    ReadError(e.to_string())
}

/// Runs a step of the Parquet reader; a panic in it becomes this file's read error.
///
/// The reader (parquet 60) panics on some damaged files instead of failing: asserts on a column
/// chunk's negative offset, on definition levels past their buffer, a dictionary page missing
/// (found by fuzzing, fuzz/regressions/merged). The files are written by a job sonde does not
/// control: such a file is skipped and counted like any other it cannot read, and the server
/// goes on. (The panic's message still goes to standard error, through the panic hook.)
fn guarded<T>(step: impl FnOnce() -> Result<T, ReadError>) -> Result<T, ReadError> {
    // Unwind safe: what the step touches (the reader) is dropped when it panicked.
    std::panic::catch_unwind(AssertUnwindSafe(step)).unwrap_or_else(|panic| {
        let what = match panic.downcast_ref::<&str>() {
            Some(s) => s.to_string(),
            None => panic.downcast_ref::<String>().cloned().unwrap_or_default(),
        };
        Err(ReadError(format!("the Parquet reader failed on this file: {what}")))
    })
}

/// Reads `path` as a file of `log`: every row its footer declares, or an error.
pub fn read_file(path: &Path, log: Changelog) -> Result<FileRows, ReadError> {
    let file = File::open(path).map_err(err)?;
    let (mut reader, declared) = guarded(|| {
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(err)?;
        let counts: Vec<i64> = builder.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
        // A negative count is read as no limit at all: refused before reading.
        if let Some(n) = counts.iter().find(|n| **n < 0) {
            return Err(ReadError(format!("a row group of {n} rows: a damaged file")));
        }
        Ok((builder.build().map_err(err)?, counts.iter().map(|n| i128::from(*n)).sum::<i128>()))
    })?;
    let mut out = match log {
        Changelog::Intervals => Rows::Intervals(Vec::new()),
        Changelog::Quantiles => Rows::Quantiles(Vec::new()),
        Changelog::Histograms => Rows::Histograms(Vec::new()),
        Changelog::Probes => Rows::Probes(Vec::new()),
        Changelog::Hosts => Rows::Hosts(Vec::new()),
        Changelog::Pairs => Rows::Pairs(Vec::new()),
    };
    let mut nulls = 0;
    while let Some(batch) = guarded(|| Ok(reader.next()))? {
        let batch = batch.map_err(err)?;
        let c = Columns::of(&batch, log)?;
        for i in 0..batch.num_rows() {
            if c.any_null(i) {
                nulls += 1;
                continue;
            }
            match &mut out {
                Rows::Intervals(rows) => rows.push(IntervalRow {
                    start: c.f64("start", i),
                    end: c.f64("end", i),
                    proto: c.str("proto", i),
                    net: c.str("net", i),
                    packets: c.i64("packets", i),
                    bytes: c.i64("bytes", i),
                    flows_opened: c.i64("flows_opened", i),
                    flows_closed: c.i64("flows_closed", i),
                    flows_active: c.i64("flows_active", i),
                    probes: c.i32("probes", i),
                    batch: c.i64("batch", i),
                }),
                Rows::Quantiles(rows) => rows.push(QuantileRow {
                    start: c.f64("start", i),
                    end: c.f64("end", i),
                    metric: c.str("metric", i),
                    dir: c.str("dir", i),
                    net: c.str("net", i),
                    unit: c.str("unit", i),
                    count: c.i64("count", i),
                    mean: c.f64("mean", i),
                    min: c.f64("min", i),
                    p50: c.f64("p50", i),
                    p95: c.f64("p95", i),
                    p99: c.f64("p99", i),
                    max: c.f64("max", i),
                    probes: c.i32("probes", i),
                    batch: c.i64("batch", i),
                }),
                Rows::Histograms(rows) => rows.push(HistogramRow {
                    start: c.f64("start", i),
                    end: c.f64("end", i),
                    metric: c.str("metric", i),
                    dir: c.str("dir", i),
                    net: c.str("net", i),
                    bin_lo: c.f64("bin_lo", i),
                    bin_hi: c.f64("bin_hi", i),
                    count: c.i64("count", i),
                    batch: c.i64("batch", i),
                }),
                Rows::Probes(rows) => rows.push(ProbeRow {
                    probe: c.str("probe", i),
                    last_start: c.f64("last_start", i),
                    last_end: c.f64("last_end", i),
                    seen_at: c.f64("seen_at", i),
                    interval_s: c.f64("interval_s", i),
                    lag_s: c.f64("lag_s", i),
                    offset_s: c.f64("offset_s", i),
                    clock_off: c.bool("clock_off", i),
                    batch: c.i64("batch", i),
                }),
                Rows::Hosts(rows) => rows.push(HostRow {
                    start: c.f64("start", i),
                    end: c.f64("end", i),
                    addr: c.str("addr", i),
                    pkts_in: c.i64("pkts_in", i),
                    bytes_in: c.i64("bytes_in", i),
                    pkts_out: c.i64("pkts_out", i),
                    bytes_out: c.i64("bytes_out", i),
                    flows: c.i64("flows", i),
                    batch: c.i64("batch", i),
                }),
                Rows::Pairs(rows) => rows.push(PairRow {
                    start: c.f64("start", i),
                    end: c.f64("end", i),
                    src: c.str("src", i),
                    dst: c.str("dst", i),
                    packets: c.i64("packets", i),
                    bytes: c.i64("bytes", i),
                    flows: c.i64("flows", i),
                    batch: c.i64("batch", i),
                }),
            }
        }
    }
    // A damaged file can end early without an error, fewer rows read than its footer declares
    // (found by fuzzing): refused as a half-read file is, never applied in part.
    let read = out.len() as i128 + i128::from(nulls);
    if read != declared {
        return Err(ReadError(format!("{read} rows read where the footer declares {declared}: a damaged file")));
    }
    Ok(FileRows { rows: out, nulls })
}

/// The contract's columns of each changelog, with their types (docs/merged.md).
pub fn columns(log: Changelog) -> &'static [(&'static str, DataType)] {
    use DataType::{Boolean as B, Float64 as D, Int32 as I, Int64 as L, Utf8 as S};
    match log {
        Changelog::Intervals => &[
            ("start", D),
            ("end", D),
            ("proto", S),
            ("net", S),
            ("packets", L),
            ("bytes", L),
            ("flows_opened", L),
            ("flows_closed", L),
            ("flows_active", L),
            ("probes", I),
            ("batch", L),
        ],
        Changelog::Quantiles => &[
            ("start", D),
            ("end", D),
            ("metric", S),
            ("dir", S),
            ("net", S),
            ("unit", S),
            ("count", L),
            ("mean", D),
            ("min", D),
            ("p50", D),
            ("p95", D),
            ("p99", D),
            ("max", D),
            ("probes", I),
            ("batch", L),
        ],
        Changelog::Histograms => &[
            ("start", D),
            ("end", D),
            ("metric", S),
            ("dir", S),
            ("net", S),
            ("bin_lo", D),
            ("bin_hi", D),
            ("count", L),
            ("batch", L),
        ],
        Changelog::Probes => &[
            ("probe", S),
            ("last_start", D),
            ("last_end", D),
            ("seen_at", D),
            ("interval_s", D),
            ("lag_s", D),
            ("offset_s", D),
            ("clock_off", B),
            ("batch", L),
        ],
        Changelog::Hosts => &[
            ("start", D),
            ("end", D),
            ("addr", S),
            ("pkts_in", L),
            ("bytes_in", L),
            ("pkts_out", L),
            ("bytes_out", L),
            ("flows", L),
            ("batch", L),
        ],
        Changelog::Pairs => &[
            ("start", D),
            ("end", D),
            ("src", S),
            ("dst", S),
            ("packets", L),
            ("bytes", L),
            ("flows", L),
            ("batch", L),
        ],
    }
}

/// A record batch's contract columns, each of its contract type.
struct Columns {
    names: &'static [(&'static str, DataType)],
    arrays: Vec<ArrayRef>,
}

impl Columns {
    fn of(batch: &RecordBatch, log: Changelog) -> Result<Columns, ReadError> {
        let names = columns(log);
        let mut arrays = Vec::with_capacity(names.len());
        for (name, want) in names {
            let array = batch
                .column_by_name(name)
                .ok_or_else(|| ReadError(format!("no column {name:?} (a {} file has {})", log.dir(), list(names))))?;
            arrays.push(widened(name, array, want)?);
        }
        Ok(Columns { names, arrays })
    }

    fn any_null(&self, row: usize) -> bool {
        self.arrays.iter().any(|a| a.is_null(row))
    }

    fn array(&self, name: &str) -> &ArrayRef {
        let i = self.names.iter().position(|(n, _)| *n == name).unwrap_or_default();
        &self.arrays[i]
    }

    // The arrays were cast to their contract type in `of`: these downcasts cannot fail.
    fn f64(&self, name: &str, row: usize) -> f64 {
        self.array(name).as_primitive_opt::<Float64Type>().map_or(f64::NAN, |a| a.value(row))
    }

    fn i64(&self, name: &str, row: usize) -> i64 {
        self.array(name).as_primitive_opt::<Int64Type>().map_or(0, |a| a.value(row))
    }

    fn i32(&self, name: &str, row: usize) -> i32 {
        self.array(name).as_primitive_opt::<Int32Type>().map_or(0, |a| a.value(row))
    }

    fn str(&self, name: &str, row: usize) -> String {
        self.array(name).as_string_opt::<i32>().map_or_else(String::new, |a| a.value(row).to_string())
    }

    fn bool(&self, name: &str, row: usize) -> bool {
        self.array(name).as_boolean_opt().is_some_and(|a| a.value(row))
    }
}

fn list(names: &[(&str, DataType)]) -> String {
    names.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// `array` as `want`, when it is of the same kind (integers, floats, strings, booleans) and
/// every value converts exactly (a cast that would overflow fails).
fn widened(name: &str, array: &ArrayRef, want: &DataType) -> Result<ArrayRef, ReadError> {
    let have = array.data_type();
    if have == want {
        return Ok(array.clone());
    }
    let kind = |t: &DataType| {
        if t.is_integer() {
            1
        } else if t.is_floating() {
            2
        } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
            3
        } else if *t == DataType::Boolean {
            4
        } else {
            0
        }
    };
    if kind(have) == 0 || kind(have) != kind(want) {
        return Err(ReadError(format!("column {name:?} is {have}, not {want}")));
    }
    let options = CastOptions { safe: false, ..CastOptions::default() };
    cast_with_options(array, want, &options).map_err(|e| ReadError(format!("column {name:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int32Array, Int64Array, LargeStringArray, StringArray};
    use parquet::arrow::ArrowWriter;

    use super::*;

    fn write(path: &Path, columns: Vec<(&str, ArrayRef)>) {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let mut w = ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    fn histogram_columns(count: ArrayRef, metric: ArrayRef) -> Vec<(&'static str, ArrayRef)> {
        let d = |v: Vec<Option<f64>>| Arc::new(Float64Array::from(v)) as ArrayRef;
        vec![
            ("start", d(vec![Some(1.0), None])),
            ("end", d(vec![Some(2.0), Some(2.0)])),
            ("metric", metric),
            ("dir", Arc::new(StringArray::from(vec!["c2s", "c2s"]))),
            ("net", Arc::new(StringArray::from(vec!["in", "in"]))),
            ("bin_lo", d(vec![Some(40.0), Some(40.0)])),
            ("bin_hi", d(vec![Some(40.5), Some(40.5)])),
            ("count", count),
            ("batch", Arc::new(Int64Array::from(vec![3, 3]))),
            ("extra", d(vec![Some(0.0), Some(0.0)])),
        ]
    }

    #[test]
    fn columns_are_found_by_name_widened_within_their_kind_and_nulls_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part-0.parquet");
        // INT for a LONG column and LargeUtf8 for a STRING one are read; a null start is not.
        let metric: ArrayRef = Arc::new(LargeStringArray::from(vec!["tcp_rtt_avg", "tcp_rtt_avg"]));
        write(&path, histogram_columns(Arc::new(Int32Array::from(vec![7, 8])), metric));
        let file = read_file(&path, Changelog::Histograms).unwrap();
        assert_eq!(file.nulls, 1);
        let Rows::Histograms(rows) = file.rows else { panic!("histograms") };
        assert_eq!((rows.len(), rows[0].count, rows[0].metric.as_str(), rows[0].batch), (1, 7, "tcp_rtt_avg", 3));
    }

    #[test]
    fn the_flow_tables_hosts_and_pairs_are_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = |v: Vec<f64>| Arc::new(Float64Array::from(v)) as ArrayRef;
        let l = |v: Vec<i64>| Arc::new(Int64Array::from(v)) as ArrayRef;
        let s = |v: Vec<&str>| Arc::new(StringArray::from(v)) as ArrayRef;
        let hosts = dir.path().join("hosts.parquet");
        write(
            &hosts,
            vec![
                ("batch", l(vec![4])),
                ("addr", s(vec!["10.0.0.1"])),
                ("start", d(vec![60.0])),
                ("end", d(vec![120.0])),
                ("pkts_in", l(vec![2])),
                ("bytes_in", l(vec![200])),
                ("pkts_out", l(vec![3])),
                ("bytes_out", l(vec![300])),
                ("flows", Arc::new(Int32Array::from(vec![1]))),
            ],
        );
        let Rows::Hosts(rows) = read_file(&hosts, Changelog::Hosts).unwrap().rows else { panic!("hosts") };
        let want = HostRow {
            start: 60.0,
            end: 120.0,
            addr: "10.0.0.1".into(),
            pkts_in: 2,
            bytes_in: 200,
            pkts_out: 3,
            bytes_out: 300,
            flows: 1,
            batch: 4,
        };
        assert_eq!(rows, [want]);
        // A hosts file is no pairs file.
        assert!(read_file(&hosts, Changelog::Pairs).unwrap_err().0.contains("no column \"src\""));
        let pairs = dir.path().join("pairs.parquet");
        write(
            &pairs,
            vec![
                ("start", d(vec![60.0, 60.0])),
                ("end", d(vec![120.0, 120.0])),
                ("src", s(vec!["10.0.0.1", "10.0.0.2"])),
                ("dst", Arc::new(StringArray::from(vec![Some("10.0.0.2"), None]))),
                ("packets", l(vec![3, 2])),
                ("bytes", l(vec![300, 200])),
                ("flows", l(vec![1, 1])),
                ("batch", l(vec![4, 4])),
            ],
        );
        let file = read_file(&pairs, Changelog::Pairs).unwrap();
        assert_eq!(file.nulls, 1);
        let Rows::Pairs(rows) = file.rows else { panic!("pairs") };
        assert_eq!(
            (rows.len(), rows[0].src.as_str(), rows[0].dst.as_str(), rows[0].bytes),
            (1, "10.0.0.1", "10.0.0.2", 300)
        );
    }

    #[test]
    fn another_shape_or_a_damaged_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part-0.parquet");
        let metric: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        // A float where the contract has an integer: refused, not truncated.
        write(&path, histogram_columns(Arc::new(Float64Array::from(vec![7.5, 8.0])), metric));
        let e = read_file(&path, Changelog::Histograms).unwrap_err();
        assert!(e.0.contains("\"count\""), "{e}");
        // The same file is not an intervals file.
        let e = read_file(&path, Changelog::Intervals).unwrap_err();
        assert!(e.0.contains("no column \"proto\""), "{e}");
        // Half a file (Spark still writing it), and no file.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(read_file(&path, Changelog::Histograms).is_err());
        assert!(read_file(&dir.path().join("gone.parquet"), Changelog::Histograms).is_err());
    }
}
