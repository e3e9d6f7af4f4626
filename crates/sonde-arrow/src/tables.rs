//! The interval and definition outputs as typed tables. They are small (one row per interval
//! and key) and made once as typed rows by sonde-stats and sonde-define ([`Table`]); each
//! column's declared kind gives its Arrow type, and each cell is converted without reading any
//! text: a time's or a span's decimal to exact ns, a statistic's to the float its text reads as.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::Schema;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use sonde_output::{ip_text, IpBuf, OutputFile};
use sonde_types::table::{Cell, Table};

use crate::flows::Builder;
use crate::schema::{data_type, field, schema_metadata};

impl Builder {
    /// Appends `cell`; `None` when it is not a value of the column's kind (or, a time or span,
    /// past `i64` ns).
    fn push_cell(&mut self, cell: &Cell<'_>, scratch: &mut IpBuf) -> Option<()> {
        match (self, cell) {
            (b, Cell::Null) => b.append_null(),
            (Builder::Count(b), Cell::Count(n)) => b.append_value(*n),
            (Builder::Flag(b), Cell::Flag(v)) => b.append_value(*v),
            (Builder::Text(b), Cell::Text(t)) => b.append_value(t),
            (Builder::Text(b), Cell::Address(ip)) => b.append_value(ip_text(*ip, scratch)),
            // A table's times are seconds, its spans milliseconds.
            (Builder::Time(b), Cell::Decimal(d)) => b.append_value(i64::try_from(d.scaled(9)?).ok()?),
            (Builder::Duration(b), Cell::Decimal(d)) => b.append_value(i64::try_from(d.scaled(6)?).ok()?),
            (Builder::Float(b), Cell::Decimal(d)) => b.append_value(d.to_f64()),
            _ => return None,
        }
        Some(())
    }
}

/// The typed table of `file` (an interval or definition output).
pub fn table(file: OutputFile, table: &Table<'_>) -> Result<RecordBatch, ArrowError> {
    let columns = table.columns;
    let mut builders: Vec<Builder> = columns.iter().map(|c| Builder::new(c.kind)).collect();
    let (mut scratch, mut bad, mut n): (IpBuf, _, _) = ([0; std::mem::size_of::<IpBuf>()], None, 0);
    table.rows(&mut |cells| {
        n += 1;
        if bad.is_some() {
            return;
        }
        if cells.len() != columns.len() {
            bad = Some(format!("row {n}: {} values for {} columns", cells.len(), columns.len()));
            return;
        }
        for ((builder, cell), column) in builders.iter_mut().zip(cells).zip(columns) {
            if builder.push_cell(cell, &mut scratch).is_none() {
                bad = Some(format!("row {n}: {}: {cell:?} in a {:?} column", column.name, column.kind));
                return;
            }
        }
    });
    if let Some(what) = bad {
        // Named by its stem: the file it would have been is `.parquet` or `.arrow`.
        return Err(ArrowError::InvalidArgumentError(format!("the {} table: {what}", file.stem())));
    }
    let stem = file.name().rsplit_once('.').map_or(file.name(), |(stem, _)| stem);
    let fields: Vec<_> = columns.iter().map(|c| field(c.name, data_type(c.kind), None)).collect();
    let schema = Arc::new(Schema::new_with_metadata(fields, schema_metadata(stem)));
    RecordBatch::try_new(schema, builders.iter_mut().map(Builder::finish).collect::<Vec<ArrayRef>>())
}

/// The interval outputs of `report` (intervals, quantiles, histograms; hosts, matrix,
/// protocols, top and the application layer's when it kept tables) as typed tables.
pub fn interval_tables(report: &sonde_stats::Report) -> Result<Vec<(OutputFile, RecordBatch)>, ArrowError> {
    let tables = sonde_output::interval_tables(report).map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
    tables.iter().map(|(file, t)| Ok((*file, table(*file, t)?))).collect()
}

/// The definition outputs of `counter` as typed tables.
pub fn definition_tables(counter: &sonde_define::Counter) -> Result<Vec<(OutputFile, RecordBatch)>, ArrowError> {
    sonde_output::definition_tables(counter).iter().map(|(file, t)| Ok((*file, table(*file, t)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DurationNanosecondType, Float64Type, TimestampNanosecondType, UInt64Type};
    use sonde_types::table::{Column, Decimal, Kind};

    const GAPS: &[Column] = &[
        Column::new("start", Kind::Time),
        Column::new("fid", Kind::Address),
        Column::new("gaps", Kind::Count),
        Column::new("min_ms", Kind::Duration),
        Column::new("p50", Kind::Float),
    ];

    #[test]
    fn cells_become_typed_columns_with_nulls() {
        let t = Table::new(GAPS, |row| {
            let start = Cell::Decimal(Decimal::seconds(1_431_969_641_947_863_123));
            row(&[start, Cell::Address([10, 0, 0, 1].into()), Cell::Count(3), Cell::Decimal(Decimal::new(5, 3)), {
                Cell::Decimal(Decimal::new(1_234_567, 6))
            }]);
            row(&[Cell::Null, Cell::text("overflow"), Cell::Count(0), Cell::Null, Cell::Null]);
        });
        let t = table(OutputFile::DefinitionGaps, &t).unwrap();
        assert_eq!(t.num_rows(), 2);
        // As the text writes it: the µs, not the ns below.
        let start = t.column(0).as_primitive::<TimestampNanosecondType>();
        assert_eq!(start.value(0), 1_431_969_641_947_863_000);
        assert!(start.is_null(1));
        assert_eq!(t.column(2).as_primitive::<UInt64Type>().value(0), 3);
        let min = t.column(3).as_primitive::<DurationNanosecondType>();
        assert_eq!(min.value(0), 5_000);
        assert!(min.is_null(1));
        assert_eq!(t.column(4).as_primitive::<Float64Type>().value(0), "1.234567".parse::<f64>().unwrap());
        assert_eq!(t.schema().metadata()["sonde.output"], "definition_gaps");
    }

    #[test]
    fn a_cell_of_another_kind_is_an_error() {
        let t = Table::new(&GAPS[..3], |row| row(&[Cell::Null, Cell::Null, Cell::text("many")]));
        let e = table(OutputFile::DefinitionGaps, &t).unwrap_err();
        assert!(e.to_string().contains("row 1: gaps: Text(\"many\") in a Count column"), "{e}");
        let t = Table::new(&GAPS[..2], |row| row(&[Cell::Decimal(Decimal::new(u64::MAX, 0)), Cell::Null]));
        assert!(table(OutputFile::DefinitionGaps, &t).is_err(), "past i64 ns");
        let t = Table::new(&GAPS[..2], |row| row(&[Cell::Null]));
        let e = table(OutputFile::DefinitionGaps, &t).unwrap_err();
        assert!(e.to_string().contains("1 values for 2 columns"), "{e}");
    }
}
