//! The interval and definition outputs as typed tables. They are small (one row per interval
//! and key), and their text is what sonde-stats and sonde-define render; each column gets one
//! declared type by its name, so a new column without one is an error, not a string.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, DurationNanosecondBuilder, Float64Builder, StringDictionaryBuilder,
    TimestampNanosecondBuilder, UInt64Builder,
};
use arrow::datatypes::{DataType, Int32Type, Schema, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use sonde_output::{definition_files, OutputFile};
use sonde_types::time::parse_seconds;

use crate::schema::{field, schema_metadata, text_type, time_type};

/// What a column of an interval or definition output holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    /// Seconds since the epoch in the text.
    Time,
    /// Milliseconds in the text (`*_ms`).
    Millis,
    Count,
    /// A statistic of a metric in its `unit` (quantiles, histogram bins).
    Float,
    Text,
    Flag,
}

impl Type {
    fn of(name: &str) -> Option<Type> {
        Some(match name {
            "start" | "end" | "answered" => Type::Time,
            _ if name.ends_with("_ms") => Type::Millis,
            "proto" | "net" | "metric" | "dir" | "unit" | "by" | "protocol" | "service" | "definition"
            | "association" | "fid" | "addr" | "src" | "dst" | "app" | "path" | "table" | "peer" => Type::Text,
            "internal" | "by_port" => Type::Flag,
            "mean" | "min" | "p50" | "p95" | "p99" | "max" | "bin_lo" | "bin_hi" => Type::Float,
            "packets" | "bytes" | "flows" | "flows_opened" | "flows_closed" | "flows_active" | "count" | "pkts_in"
            | "bytes_in" | "pkts_out" | "bytes_out" | "ip_proto" | "port" | "rank" | "value" | "version" | "gaps"
            | "samples" | "ambiguous" | "refused" | "expired" | "unanswered" | "own_packets" | "own_bytes"
            | "own_flows" | "n" | "samples_unwritten" => Type::Count,
            _ => return None,
        })
    }

    fn data_type(self) -> DataType {
        match self {
            Type::Time => time_type(),
            Type::Millis => DataType::Duration(TimeUnit::Nanosecond),
            Type::Count => DataType::UInt64,
            Type::Float => DataType::Float64,
            Type::Text => text_type(),
            Type::Flag => DataType::Boolean,
        }
    }
}

enum Builder {
    Time(TimestampNanosecondBuilder),
    Millis(DurationNanosecondBuilder),
    Count(UInt64Builder),
    Float(Float64Builder),
    Text(StringDictionaryBuilder<Int32Type>),
    Flag(BooleanBuilder),
}

impl Builder {
    fn new(t: Type) -> Builder {
        match t {
            Type::Time => Builder::Time(TimestampNanosecondBuilder::new().with_timezone("UTC")),
            Type::Millis => Builder::Millis(DurationNanosecondBuilder::new()),
            Type::Count => Builder::Count(UInt64Builder::new()),
            Type::Float => Builder::Float(Float64Builder::new()),
            Type::Text => Builder::Text(StringDictionaryBuilder::new()),
            Type::Flag => Builder::Flag(BooleanBuilder::new()),
        }
    }

    /// Appends the value `text` spells (`-` or nothing: null); `None` when it does not parse.
    fn push(&mut self, text: &str) -> Option<()> {
        if text == "-" || text.is_empty() {
            match self {
                Builder::Time(b) => b.append_null(),
                Builder::Millis(b) => b.append_null(),
                Builder::Count(b) => b.append_null(),
                Builder::Float(b) => b.append_null(),
                Builder::Text(b) => b.append_null(),
                Builder::Flag(b) => b.append_null(),
            }
            return Some(());
        }
        match self {
            Builder::Time(b) => b.append_value(i64::try_from(parse_seconds(text)?).ok()?),
            // Milliseconds with up to 6 decimals, read as "seconds", are ns × 1000, exactly.
            Builder::Millis(b) => b.append_value(i64::try_from(parse_seconds(text)? / 1_000).ok()?),
            Builder::Count(b) => b.append_value(text.parse().ok()?),
            Builder::Float(b) => b.append_value(text.parse().ok()?),
            Builder::Text(b) => b.append_value(text),
            Builder::Flag(b) => b.append_value(match text {
                "0" => false,
                "1" => true,
                _ => return None,
            }),
        }
        Some(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Time(b) => Arc::new(b.finish()),
            Builder::Millis(b) => Arc::new(b.finish()),
            Builder::Count(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Flag(b) => Arc::new(b.finish()),
        }
    }
}

/// The typed table of `file` (an interval or definition output) from its TSV text.
pub fn table(file: OutputFile, tsv: &str) -> Result<RecordBatch, ArrowError> {
    let bad = |what: String| ArrowError::ParseError(format!("{file}: {what}"));
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next().ok_or_else(|| bad("no header".into()))?.split('\t').collect();
    let types = header
        .iter()
        .map(|name| Type::of(name).ok_or_else(|| bad(format!("column {name:?} has no declared type"))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut builders: Vec<Builder> = types.iter().map(|t| Builder::new(*t)).collect();
    for (n, line) in lines.enumerate() {
        let values: Vec<&str> = line.split('\t').collect();
        if values.len() != header.len() {
            return Err(bad(format!("line {}: {} values for {} columns", n + 2, values.len(), header.len())));
        }
        for ((builder, value), name) in builders.iter_mut().zip(values).zip(&header) {
            builder.push(value).ok_or_else(|| bad(format!("line {}: {name}: {value:?}", n + 2)))?;
        }
    }
    let stem = file.name().rsplit_once('.').map_or(file.name(), |(stem, _)| stem);
    let fields: Vec<_> = header.iter().zip(&types).map(|(name, t)| field(name, t.data_type(), None)).collect();
    let schema = Arc::new(Schema::new_with_metadata(fields, schema_metadata(stem)));
    RecordBatch::try_new(schema, builders.iter_mut().map(Builder::finish).collect())
}

/// The interval outputs of `report` (intervals, quantiles, histograms; hosts, matrix,
/// protocols, top and the application layer's when it kept tables) as typed tables.
pub fn interval_tables(report: &sonde_stats::Report) -> Result<Vec<(OutputFile, RecordBatch)>, ArrowError> {
    let files = report.render().map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
    files
        .into_iter()
        .map(|(name, text)| {
            let file = OutputFile::from_name(name)
                .ok_or_else(|| ArrowError::InvalidArgumentError(format!("{name}: not an output file")))?;
            Ok((file, table(file, &text)?))
        })
        .collect()
}

/// The definition outputs of `counter` as typed tables.
pub fn definition_tables(counter: &sonde_define::Counter) -> Result<Vec<(OutputFile, RecordBatch)>, ArrowError> {
    definition_files(counter).into_iter().map(|(file, text)| Ok((file, table(file, &text)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DurationNanosecondType, TimestampNanosecondType, UInt64Type};

    #[test]
    fn text_becomes_typed_columns_with_nulls() {
        let tsv = "start\tend\tdefinition\tfid\tgaps\tmin_ms\n\
                   1431969641.947863\t1431969642.000000\tsrc\t10.0.0.1\t3\t0.005000\n\
                   1431969641.000000\t1431969642.000000\tsrc\t10.0.0.2\t0\t-\n";
        let t = table(OutputFile::DefinitionGaps, tsv).unwrap();
        assert_eq!(t.num_rows(), 2);
        let start = t.column(0).as_primitive::<TimestampNanosecondType>();
        assert_eq!(start.value(0), 1_431_969_641_947_863_000);
        assert_eq!(t.column(4).as_primitive::<UInt64Type>().value(0), 3);
        let min = t.column(5).as_primitive::<DurationNanosecondType>();
        assert_eq!(min.value(0), 5_000);
        assert!(min.is_null(1));
        assert_eq!(t.schema().metadata()["sonde.output"], "definition_gaps");
    }

    #[test]
    fn unknown_columns_and_bad_values_are_errors() {
        let e = table(OutputFile::Intervals, "start\tmystery\n1.0\t2\n").unwrap_err();
        assert!(e.to_string().contains("\"mystery\" has no declared type"), "{e}");
        let e = table(OutputFile::Intervals, "start\tpackets\n1.0\tmany\n").unwrap_err();
        assert!(e.to_string().contains("line 2: packets: \"many\""), "{e}");
        let e = table(OutputFile::Intervals, "start\tpackets\n1.0\n").unwrap_err();
        assert!(e.to_string().contains("1 values for 2 columns"), "{e}");
    }
}
