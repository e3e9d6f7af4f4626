//! A finished run as Python gets it: every table built in the run's thread (Rust's side, no
//! GIL), then handed over through the Arrow C data interface (no copy of the columns) in the
//! caller's thread.

use arrow::pyarrow::{IntoPyArrow, Table};
use arrow::record_batch::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sonde_analysis::Analyzed;
use sonde_arrow::FlowTables;

use crate::errors::internal_error;

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

impl Finished {
    /// The results of `analyzed` (in the run's thread), with its flow logs as `flows`.
    pub fn of<P>(analyzed: Analyzed<P>, flows: Option<FlowTables>) -> Finished {
        let summary = analyzed.summary;
        let input_error = summary
            .input_error
            .as_ref()
            .map(|e| format!("{}: {}; results cover the input before that point", summary.input, e.message));
        Finished { flows, tables: analyzed.tables, summary_json: summary.to_json(), input_error }
    }

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
