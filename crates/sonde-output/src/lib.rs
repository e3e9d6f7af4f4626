//! sonde-output: the file sinks at the top of the pipeline.
//!
//! Writes flow records into an output directory as `tcp_flows.tsv`/`udp_flows.tsv` (a header
//! line, then one tab-separated line per flow) or `.jsonl` (one JSON object per flow), in a
//! deterministic order (flow start, then tuple) with fixed number formatting, so the same trace
//! gives byte-identical logs. [`OutputDir::prepare`] checks the directory before any packet is
//! read and refuses to overwrite a previous run unless forced.
//!
//! It also reads them back: [`read`] is the one reader of the directory's tab-separated files
//! and JSON lines, used by the figures, the comparison, the HTTP view and the spool's manifest.
//!
//! ```
//! use sonde_output::{tcp_columns, Format};
//! assert_eq!(tcp_columns()[0].name, "c_ip");
//! assert_eq!(Format::Tsv.extension(), "tsv");
//! ```

mod columns;
mod line;
pub mod read;
mod writer;

pub use columns::{tcp_columns, udp_columns, Column, Value};
pub use line::LineFormat;
pub use writer::{write_records, FlowLines, Format, LineSink, OutputDir, OutputError};
