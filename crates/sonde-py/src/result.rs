//! A finished run as Python gets it: every table built in the run's thread (Rust's side, no
//! GIL), then handed over through the Arrow C data interface (no copy of the columns) in the
//! caller's thread.

use arrow::pyarrow::{IntoPyArrow, Table};
use arrow::record_batch::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sonde_arrow::FlowTables;
use sonde_engine::RunResult;
use sonde_output::summary::{self, ChangeSummary, Monitoring, Summary};

use crate::errors::internal_error;

/// What a run's summary says about its settings (carried into the run's thread).
pub struct About {
    pub input: summary::Input,
    pub interval_cfg: Option<sonde_stats::Config>,
    pub anon_summary: Option<summary::AnonSummary>,
    /// The run's anonymizer (a clone sharing tcpdpriv's table), for the table's figures.
    pub anonymizer: Option<sonde_anon::Anonymizer>,
    pub has_changes: bool,
}

/// A run's results, built, not yet Python objects.
pub struct Finished {
    /// The flow logs (`None` for a stream, which handed them over as they came).
    pub flows: Option<FlowTables>,
    /// The interval and definition tables, by file stem (`intervals`, `hosts`, `definitions`…).
    pub tables: Vec<(String, RecordBatch)>,
    /// summary.json's text.
    pub summary_json: String,
    /// The CLI's warning for an input that ended early.
    pub input_error: Option<String>,
}

/// Builds the tables and the summary of `result` (in the run's thread).
pub fn finish<P>(result: RunResult<P>, about: About, flows: Option<FlowTables>) -> Result<Finished, String> {
    let mut tables = Vec::new();
    let mut named = |files: Vec<(sonde_output::OutputFile, RecordBatch)>| {
        for (file, batch) in files {
            let name = file.name();
            tables.push((name.strip_suffix(".tsv").unwrap_or(name).to_string(), batch));
        }
    };
    let mut monitoring = None;
    if let (Some(cfg), Some(report)) = (&about.interval_cfg, &result.intervals) {
        named(sonde_arrow::interval_tables(report).map_err(|e| format!("interval tables: {e}"))?);
        monitoring = Some(Monitoring::new(cfg, report, None));
    }
    let mut defined = None;
    if let Some(counter) = &result.definitions {
        named(sonde_arrow::definition_tables(counter).map_err(|e| format!("definition tables: {e}"))?);
        defined = Some(summary::definition_summaries(counter));
    }
    let input_name = about.input.name.clone();
    let outcome = sonde_engine::Outcome { stats: result.stats, input_error: result.input_error };
    let mut summary = Summary::new(about.input, outcome, result.timing.into());
    summary.filter_uncompilable_frames = result.filter_uncompilable_frames;
    summary.monitoring = monitoring;
    summary.definitions = defined;
    summary.anonymization = about.anon_summary.map(|mut s| {
        s.tcpdpriv = about.anonymizer.as_ref().and_then(|a| a.table_stats()).map(|t| summary::TcpdprivSummary {
            addresses: t.addresses,
            max_addresses: t.max_addresses,
            unmapped: t.unmapped,
        });
        s
    });
    summary.definition_changes = result.definitions.as_ref().filter(|_| about.has_changes).map(ChangeSummary::log);
    let input_error = summary
        .input_error
        .as_ref()
        .map(|e| format!("{input_name}: {}; results cover the input before that point", e.message));
    Ok(Finished { flows, tables, summary_json: summary.to_json(), input_error })
}

impl Finished {
    /// The results as a dict: `tcp`, `udp`, `icmp` (pyarrow.Table or None), `tables` (name →
    /// pyarrow.Table), `summary` (summary.json's text) and `input_error` (str or None).
    pub fn into_py(self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let out = PyDict::new(py);
        let (tcp, udp, icmp) = match self.flows {
            Some(FlowTables { tcp, udp, icmp }) => {
                (Some(table(py, tcp)?), Some(table(py, udp)?), Some(table(py, icmp)?))
            }
            None => (None, None, None),
        };
        out.set_item("tcp", tcp)?;
        out.set_item("udp", udp)?;
        out.set_item("icmp", icmp)?;
        let tables = PyDict::new(py);
        for (name, batch) in self.tables {
            tables.set_item(name, table(py, batch)?)?;
        }
        out.set_item("tables", tables)?;
        out.set_item("summary", self.summary_json)?;
        out.set_item("input_error", self.input_error)?;
        Ok(out.unbind())
    }
}

/// One batch as a `pyarrow.Table`, its buffers shared (the C data interface), not copied.
pub fn table(py: Python<'_>, batch: RecordBatch) -> PyResult<Bound<'_, PyAny>> {
    let schema = batch.schema();
    let table = Table::try_new(vec![batch], schema).map_err(|e| internal_error("table", &e))?;
    table.into_pyarrow(py)
}
