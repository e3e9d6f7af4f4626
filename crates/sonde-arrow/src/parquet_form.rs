//! The Parquet form of the typed tables: the one rule for what a time and a span become in a
//! Parquet file, so that DuckDB, Spark (without legacy options), polars, pandas and pyarrow all
//! read them with their unit. The CLI's `--format parquet` (file.rs) and the Python package's
//! Parquet (`sonde.parquet_form`, used by `python -m sonde.spark analyze`) both go through it.
//!
//! - A time, `Timestamp(ns, "UTC")`, becomes `Timestamp(µs, "UTC")`: Parquet's
//!   `TIMESTAMP(MICROS, isAdjustedToUTC)`, which Spark reads as `TIMESTAMP` (it refuses
//!   `NANOS` unless `spark.sql.legacy.parquet.nanosAsLong`, and then reads a long), DuckDB as
//!   `TIMESTAMP WITH TIME ZONE`. The ns are floored to the µs (a time keeps its second, hour and
//!   day); the sub-µs digits some captures carry (ERF, nanosecond pcap and pcapng) are lost in
//!   Parquet only.
//! - A span, `Duration(ns)`, becomes `Float64` milliseconds (the TSV's unit) with the field
//!   metadata `unit` = `ms`: Parquet has no duration type (Arrow's `duration` is stored as a bare
//!   `INT64` that DuckDB and Spark read as an integer of ns) and Spark refuses Parquet's
//!   `INTERVAL`. A double holds every span below 2^51 ns (26 days) exactly to the ns.
//! - Every other type is kept.
//!
//! Arrow IPC files and the Python package's tables keep `Timestamp(ns)` and `Duration(ns)`: every
//! Arrow reader reads those typed.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, DurationNanosecondType, Field, Schema, SchemaRef, TimeUnit, TimestampNanosecondType};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

/// The metadata key, on a span's field in Parquet, of its unit (`ms`).
pub const UNIT_KEY: &str = "unit";

/// The Parquet form of `field` (its metadata kept; a span's gains `unit` = `ms`).
pub fn parquet_field(field: &Field) -> Field {
    match field.data_type() {
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
            field.clone().with_data_type(DataType::Timestamp(TimeUnit::Microsecond, tz.clone()))
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            let mut metadata: HashMap<String, String> = field.metadata().clone().into();
            metadata.insert(UNIT_KEY.to_string(), "ms".to_string());
            field.clone().with_data_type(DataType::Float64).with_metadata(metadata)
        }
        _ => field.clone(),
    }
}

/// The Parquet form of `schema` (its metadata kept).
pub fn parquet_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<Field> = schema.fields().iter().map(|f| parquet_field(f)).collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `batch` in its Parquet form: times floored to the µs, spans as float ms; other columns
/// shared, not copied.
pub fn parquet_batch(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = parquet_schema(batch.schema_ref());
    let columns = batch.columns().iter().map(parquet_column).collect();
    RecordBatch::try_new(schema, columns)
}

fn parquet_column(column: &ArrayRef) -> ArrayRef {
    match column.data_type() {
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
            let ns = column.as_primitive::<TimestampNanosecondType>();
            let us: TimestampMicrosecondArray = ns.unary(|v| v.div_euclid(1000));
            Arc::new(us.with_timezone_opt(tz.clone()))
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            let ns = column.as_primitive::<DurationNanosecondType>();
            let ms: Float64Array = ns.unary(|v| v as f64 / 1e6);
            Arc::new(ms)
        }
        _ => column.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{DurationNanosecondArray, TimestampNanosecondArray, UInt64Array};
    use arrow::datatypes::{Float64Type, TimestampMicrosecondType};

    #[test]
    fn times_become_microseconds_and_spans_float_milliseconds() {
        let schema = Arc::new(Schema::new_with_metadata(
            vec![
                Field::new("first", DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), true),
                Field::new("c_rtt_avg", DataType::Duration(TimeUnit::Nanosecond), true)
                    .with_metadata(HashMap::from([("tsv_unit".to_string(), "ms".to_string())])),
                Field::new("s_mss", DataType::UInt64, true),
            ],
            HashMap::from([("sonde.output".to_string(), "tcp_flows".to_string())]),
        ));
        let first =
            TimestampNanosecondArray::from(vec![Some(1_700_000_000_123_456_789), None, Some(-1)]).with_timezone("UTC");
        let rtt = DurationNanosecondArray::from(vec![Some(12_345_678), None, Some(1)]);
        let mss = UInt64Array::from(vec![Some(1460), None, Some(536)]);
        let batch = RecordBatch::try_new(schema, vec![Arc::new(first), Arc::new(rtt), Arc::new(mss)]).unwrap();
        let p = parquet_batch(&batch).unwrap();
        let s = p.schema();
        assert_eq!(s.metadata()["sonde.output"], "tcp_flows");
        assert_eq!(s.field(0).data_type(), &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
        assert_eq!(s.field(1).data_type(), &DataType::Float64);
        assert_eq!(s.field(1).metadata()["unit"], "ms");
        assert_eq!(s.field(1).metadata()["tsv_unit"], "ms");
        assert_eq!(s.field(2), batch.schema().field(2));
        let us = p.column(0).as_primitive::<TimestampMicrosecondType>();
        // Floored: a time keeps its second (and day) even before the epoch.
        assert_eq!((us.value(0), us.is_null(1), us.value(2)), (1_700_000_000_123_456, true, -1));
        let ms = p.column(1).as_primitive::<Float64Type>();
        assert_eq!((ms.value(0), ms.is_null(1), ms.value(2)), (12.345678, true, 1e-6));
        // Exact to the ns below 2^51 ns: the ns come back from the float.
        for v in [1_i64, 999_999, 86_400_000_000_123, (1 << 51) - 1] {
            assert_eq!((v as f64 / 1e6 * 1e6).round() as i64, v);
        }
        assert_eq!(parquet_schema(&batch.schema()), s);
    }
}
