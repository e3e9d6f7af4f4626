//! sonde-output: the output directory, at the top of the pipeline. It owns every file a run
//! writes there ([`OutputFile`]) and writes each of them.
//!
//! Flow records go into `tcp_flows.tsv`/`udp_flows.tsv` (a header line, then one tab-separated
//! line per flow) or `.jsonl` (one JSON object per flow), in a deterministic order (flow start,
//! then tuple) with fixed number formatting, so the same trace gives byte-identical logs. The
//! interval files, the definitions files, `capture.tsv` and `summary.json` (a typed
//! [`Summary`], with a published JSON Schema) are written by [`OutputDir`] too. Every file
//! appears whole or not at all ([`PendingFile`]: a temporary name, fsync, rename).
//! [`OutputDir::prepare`] checks the directory before any packet is read and refuses to
//! overwrite a previous run unless forced.
//!
//! With [`Layout::Tstat`] the flow logs are Tstat 3.3's instead (`log_tcp_complete`,
//! `log_tcp_nocomplete`, `log_udp_complete`: its header, columns and number formats; see
//! [`tstat`]).
//!
//! It also reads them back: [`read`] is the one reader of the directory's tab-separated files
//! and JSON lines, used by the figures, the comparison, the HTTP view and the spool's manifest.
//!
//! ```
//! use sonde_output::{tcp_columns, Format, OutputFile};
//! assert_eq!(tcp_columns()[0].name, "c_ip");
//! assert_eq!(Format::Tsv.extension(), "tsv");
//! assert_eq!(OutputFile::TcpFlows(Format::Jsonl).name(), "tcp_flows.jsonl");
//! ```

#![forbid(unsafe_code)]

mod capture;
mod columns;
mod files;
mod line;
pub mod pending;
pub mod read;
pub mod sorted;
pub mod summary;
pub mod tstat;
mod writer;

pub use capture::{capture_tsv, CaptureCounters};
pub use columns::{
    collect, feature_columns, icmp_columns, mark_anonymized, tcp_columns, tcp_columns_with, udp_columns,
    udp_columns_with, Column, Featured, Kind, Logged, Value, Visit,
};
pub use files::{OutputFile, Outputs, UnknownOutput};
pub use line::{ip_text, IpBuf, LineFormat};
pub use pending::{write_atomic, PendingFile, PART_SUFFIX};
pub use sorted::{SortBuffer, Spilled};
pub use summary::Summary;
pub use tstat::Layout;
pub use writer::{
    anonymized_record, definition_files, definition_tables, icmp_order_key, interval_tables, order_key, shown_icmp,
    write_records, FlowLines, Format, LineSink, OrderKey, OutputDir, OutputError, LOCK_NAME,
};
