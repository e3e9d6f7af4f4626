//! sonde-py: the extension module `sonde._sonde` under the Python package `sonde` (maturin,
//! abi3). A thin layer over [`sonde_analysis::Analysis`], the run the CLI makes: the options
//! are the CLI's config, checked by the same code; the run goes on in a thread of its own while
//! the caller waits with the GIL released (Ctrl-C raises KeyboardInterrupt within 100 ms and stops the run), and the results
//! cross into Python as Arrow tables through the C data interface — sonde-arrow's tables,
//! shared, never copied, never one Python object per flow.
//!
//! - [`analyze`]: a whole trace, every table at the end ([`sonde_arrow::ArrowSink`]);
//! - [`stream`] and [`monitor`]: the flows as batches while the run goes
//!   ([`sonde_arrow::StreamSink`] through a bounded channel, so memory stays flat on a trace
//!   larger than memory), from a trace or live interfaces ([`sonde_live`]);
//! - [`errors`]: one exception hierarchy with the CLI's messages.
//!
//! The pure-Python facade (`python/sonde/__init__.py`) gives every option its default and its
//! documentation, and wraps the dicts returned here into `sonde.Run`; its tests are in
//! `python/tests`.

// No `forbid(unsafe_code)`: pyo3's macros expand to unsafe FFI glue; this crate writes none.

mod control;
mod errors;
mod result;
mod settings;
mod stream;

use std::path::PathBuf;
use std::sync::mpsc;

use arrow::datatypes::Schema;
use arrow::pyarrow::{IntoPyArrow, PyArrowType, Table, ToPyArrow};
use arrow::record_batch::RecordBatch;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sonde_arrow::{ArrowSink, FlowBatches};
use sonde_capture::PacketSource;

use control::{Stop, Stoppable, Waited};
use errors::{internal_error, trace_error, SondeError};
use result::Finished;

/// Analyses the trace at `path` to its end and returns its results as a dict of
/// `pyarrow.Table`s and summary.json's text (the facade makes a `sonde.Run` of it).
#[pyfunction]
fn analyze(py: Python<'_>, path: PathBuf, options: &str) -> PyResult<Py<PyDict>> {
    let (mut analysis, (source, name)) = settings::prepare(settings::config(options)?, || open_trace(&path))?;
    let compression = source.compression().map(str::to_string);
    // With several workers, a trace file is read by as many readers, each reading it whole
    // (as the CLI's analyze does).
    let readers = analysis.readers_for_file(&path);
    let sources = if readers > 1 {
        sonde_capture::open_readers(&path, readers).map_err(|e| trace_error(&name, &e))?
    } else {
        vec![source]
    };
    let stop = Stop::new();
    let (tx, mut rx) = mpsc::sync_channel::<Result<Finished, String>>(1);
    let thread_stop = stop.clone();
    std::thread::Builder::new()
        .name("sonde-run".into())
        .spawn(move || {
            let mut sources: Vec<Stoppable> =
                sources.into_iter().map(|source| Stoppable { source, stop: thread_stop.clone() }).collect();
            let mut readers: Vec<&mut (dyn PacketSource + Send)> =
                sources.iter_mut().map(|s| s as &mut (dyn PacketSource + Send)).collect();
            let (anonymizer, features) = (analysis.anonymizer(), analysis.features());
            let sinks = || ArrowSink::new().anonymized(anonymizer.clone()).features(features);
            let input = (name.as_str(), compression.as_deref());
            let outcome =
                analysis.analyze(&mut readers, &sinks, input).map_err(|e| format!("{e:#}")).and_then(|mut analyzed| {
                    if thread_stop.stopped() {
                        // Interrupted: nobody waits for the tables.
                        return Err("interrupted".into());
                    }
                    let mut flows = FlowBatches::default();
                    for part in std::mem::take(&mut analyzed.flows) {
                        flows.absorb(part);
                    }
                    let tables = flows.into_tables().map_err(|e| format!("flow tables: {e}"))?;
                    Ok(Finished::of(analyzed, Some(tables)))
                });
            // The caller may have gone (Ctrl-C): then the result is dropped.
            let _ = tx.send(outcome);
        })
        .map_err(|e| internal_error("starting the run's thread", &e))?;
    match control::wait(py, &mut rx, &stop, None)? {
        Waited::Got(Ok(finished)) => finished.into_py(py),
        Waited::Got(Err(message)) => Err(SondeError::new_err(message)),
        Waited::Ended => Err(SondeError::new_err("the run ended without a result (see the panic on stderr)")),
    }
}

/// Opens the trace at `path` as the CLI does (its message if it cannot), and its name.
fn open_trace(path: &std::path::Path) -> PyResult<(sonde_capture::BoxedSource, String)> {
    let name = path.display().to_string();
    let source = sonde_capture::open(path).map_err(|e| trace_error(&name, &e))?;
    Ok((source, name))
}

/// The flow logs' schemas: (tcp, udp) as `pyarrow.Schema`s, with each field's unit and
/// definition in its metadata.
#[pyfunction]
fn schemas(py: Python<'_>) -> PyResult<(Bound<'_, PyAny>, Bound<'_, PyAny>)> {
    Ok((sonde_arrow::tcp_schema().to_pyarrow(py)?, sonde_arrow::udp_schema().to_pyarrow(py)?))
}

/// The Parquet form of a `pyarrow.Table` (or any Arrow stream) of sonde's: times floored to the
/// µs, spans as float ms with the field metadata `unit` = `ms` — what `sonde analyze --format
/// parquet` writes, by the same rule (`sonde_arrow::parquet_batch`).
#[pyfunction]
fn parquet_table(py: Python<'_>, table: PyArrowType<Table>) -> PyResult<Bound<'_, PyAny>> {
    let (batches, schema) = table.0.into_inner();
    let converted = batches
        .into_iter()
        .map(|b| {
            RecordBatch::try_new(schema.clone(), b.columns().to_vec()).and_then(|b| sonde_arrow::parquet_batch(&b))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PyValueError::new_err(format!("parquet form: {e}")))?;
    let parquet = Table::try_new(converted, sonde_arrow::parquet_schema(&schema))
        .map_err(|e| PyValueError::new_err(format!("parquet form: {e}")))?;
    parquet.into_pyarrow(py)
}

/// The Parquet form of a `pyarrow.RecordBatch` (as [`parquet_table`]'s).
#[pyfunction]
fn parquet_batch(py: Python<'_>, batch: PyArrowType<RecordBatch>) -> PyResult<Bound<'_, PyAny>> {
    let parquet =
        sonde_arrow::parquet_batch(&batch.0).map_err(|e| PyValueError::new_err(format!("parquet form: {e}")))?;
    parquet.to_pyarrow(py)
}

/// The Parquet form of a `pyarrow.Schema` (as [`parquet_table`]'s).
#[pyfunction]
fn parquet_schema(py: Python<'_>, schema: PyArrowType<Schema>) -> PyResult<Bound<'_, PyAny>> {
    sonde_arrow::parquet_schema(&schema.0).to_pyarrow(py)
}

/// sonde's percentile rule (`sonde_stats::percentiles`, the one definition): the 50th, 95th and
/// 99th percentiles by nearest rank of `count` values with exact `min` and `max`, from their bins
/// `[lo, hi)` holding `n` each (`los`, `his`, `ns`: one entry per bin, sorted by `lo`), each
/// the middle of the bin holding its rank, kept within `min` and `max`. Integers in the
/// metric's base unit (ns, ppm…), as the merge of many probes adds them.
#[pyfunction]
fn percentiles(
    count: u64,
    min: u64,
    max: u64,
    los: Vec<u64>,
    his: Vec<u64>,
    ns: Vec<u64>,
) -> PyResult<(u64, u64, u64)> {
    if los.len() != his.len() || los.len() != ns.len() {
        return Err(pyo3::exceptions::PyValueError::new_err("los, his and ns differ in length"));
    }
    let bins = los.into_iter().zip(his).zip(ns).map(|((lo, hi), n)| (lo, hi, n));
    let [p50, p95, p99] = sonde_stats::percentiles(count, min, max, bins, [50, 95, 99]);
    Ok((p50, p95, p99))
}

#[pymodule]
fn _sonde(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(stream::stream, m)?)?;
    m.add_function(wrap_pyfunction!(stream::monitor, m)?)?;
    m.add_function(wrap_pyfunction!(schemas, m)?)?;
    m.add_function(wrap_pyfunction!(percentiles, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_table, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_batch, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_schema, m)?)?;
    m.add_class::<stream::FlowStream>()?;
    Ok(())
}
