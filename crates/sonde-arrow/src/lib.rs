//! sonde-arrow: sonde's outputs as typed Arrow tables, and their Parquet and Arrow IPC files.
//!
//! The TSV logs keep Tstat's conventions (times in ms, `0` for a metric without a sample, `-`
//! for no value, booleans as 0/1). The typed outputs say what each value is instead:
//! - times are `Timestamp(ns, UTC)`, spans `Duration(ns)`, flags `Boolean`, counts `UInt64`
//!   (in Parquet files times are `Timestamp(µs, UTC)` and spans float ms, which every engine
//!   reads with its unit: [`parquet_batch`]);
//! - a metric without a sample (no RTT sample, an event that never happened) is null, never 0;
//! - addresses and names are dictionary-encoded strings;
//! - each field's metadata holds its unit and one-line definition from `docs/metrics.md`, and
//!   the schema's metadata sonde's version.
//!
//! Flow logs are built from the records themselves ([`ArrowSink`], one per worker, or
//! [`StreamSink`] to hand batches over as flows end); the interval and definition outputs
//! from their typed rows (sonde-types' `Table`), by each column's declared kind ([`table`]).
//!
//! ```
//! use sonde_arrow::{tcp_schema, arrow::datatypes::DataType};
//! let schema = tcp_schema();
//! assert_eq!(schema.field_with_name("c_pkts_all").unwrap().data_type(), &DataType::UInt64);
//! assert!(schema.field_with_name("c_rtt_avg").unwrap().is_nullable());
//! ```

#![forbid(unsafe_code)]

mod file;
mod flows;
mod parquet_form;
mod schema;
mod sorted;
mod tables;

pub use arrow;
pub use file::{write_batches, write_flow_log, TypedFormat};
pub use flows::{ArrowSink, FlowBatch, FlowBatches, FlowTables, Protocol, StreamSink};
pub use parquet_form::{parquet_batch, parquet_field, parquet_schema};
pub use schema::{definition, tcp_schema, tcp_schema_with, udp_schema, udp_schema_with};
pub use tables::{definition_tables, interval_tables, table};
