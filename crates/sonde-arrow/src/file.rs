//! Typed output files: Parquet (zstd) and Arrow IPC (zstd), each written whole or not at all.
//! Parquet files hold the tables' Parquet form (times in µs, spans as float ms: parquet_form.rs).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::ipc::CompressionType;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use sonde_output::{OutputError, OutputFile, PendingFile};

use crate::flows::{FlowBatches, Protocol};
use crate::parquet_form::{parquet_batch, parquet_schema};

/// Rows per Parquet row group, at most.
const ROW_GROUP_ROWS: usize = 65_536;

/// Memory a Parquet row group being written may take before it is written out (then it has
/// fewer rows).
const ROW_GROUP_MEMORY: usize = 16 << 20;

/// A typed file format (`--format parquet` or `--format arrow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypedFormat {
    Parquet,
    /// The Arrow IPC file format (Feather v2).
    Arrow,
}

impl TypedFormat {
    pub fn extension(self) -> &'static str {
        match self {
            TypedFormat::Parquet => "parquet",
            TypedFormat::Arrow => "arrow",
        }
    }

    /// The name `file` has in this format: `tcp_flows.parquet`, `intervals.arrow`…
    pub fn file_name(self, file: OutputFile) -> String {
        let name = file.name();
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        format!("{stem}.{}", self.extension())
    }

    /// Every name a run in this format may write, but the summary.
    pub fn all_names(self) -> Vec<String> {
        OutputFile::ALL.into_iter().filter(|f| *f != OutputFile::Summary).map(|f| self.file_name(f)).collect()
    }
}

/// Writes `batches` (all of `batches[0]`'s schema; none: an empty file of `schema`) to `path`
/// in `format`, through a temporary file moved into place when complete.
pub fn write_batches(
    path: &Path,
    format: TypedFormat,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), OutputError> {
    write_with(path, format, schema, |write| batches.iter().try_for_each(|b| write(b.clone())))
}

/// Writes the TCP, UDP or ICMP log of `parts` to `path` in `format`, batch by batch as the
/// sorted runs merge (memory: the row group being encoded, a small batch per run), through a
/// temporary file moved into place when complete.
pub fn write_flow_log(path: &Path, format: TypedFormat, parts: &FlowBatches, log: Protocol) -> Result<(), OutputError> {
    let schema = parts.schema(log);
    write_with(path, format, &schema, |write| parts.for_each_batch(log, write))
}

/// Writes what `body` hands its writer (batches of one schema, the first's; none: an empty file
/// of `schema`).
fn write_with(
    path: &Path,
    format: TypedFormat,
    schema: &SchemaRef,
    body: impl FnOnce(&mut dyn FnMut(RecordBatch) -> Result<(), ArrowError>) -> Result<(), ArrowError>,
) -> Result<(), OutputError> {
    let failed = |reason: String| OutputError { path: path.to_path_buf(), reason };
    let pending = PendingFile::create(path, true).map_err(|e| failed(format!("cannot create: {e}")))?;
    let mut file = Some(BufWriter::with_capacity(1 << 16, pending));
    let mut encoder: Option<Encoder<BufWriter<PendingFile>>> = None;
    let mut write = |batch: RecordBatch| -> Result<(), ArrowError> {
        let e = match (&mut encoder, file.take()) {
            (Some(e), _) => e,
            (None, Some(f)) => encoder.insert(Encoder::new(f, format, &batch.schema())?),
            (None, None) => unreachable!("the file goes to the encoder"),
        };
        e.write(&batch)
    };
    body(&mut write).map_err(|e| failed(format!("write failed: {e}")))?;
    let encoder = match (encoder, file) {
        (Some(e), _) => e,
        (None, Some(f)) => Encoder::new(f, format, schema).map_err(|e| failed(format!("write failed: {e}")))?,
        (None, None) => unreachable!("the file goes to the encoder"),
    };
    let w = encoder.finish().map_err(|e| failed(format!("write failed: {e}")))?;
    let pending = w.into_inner().map_err(|e| failed(format!("write failed: {}", e.error())))?;
    pending.commit(true).map_err(|e| failed(format!("write failed: {e}")))
}

/// A typed file being written, batch by batch.
enum Encoder<W: Write + Send> {
    /// Batches are written in their Parquet form ([`parquet_batch`]).
    Parquet(ArrowWriter<W>),
    /// With the schema its batches are cast to: text as plain strings, because the IPC file
    /// format cannot replace a dictionary from one batch to the next.
    Arrow(FileWriter<W>, SchemaRef),
}

impl<W: Write + Send> Encoder<W> {
    fn new(w: W, format: TypedFormat, schema: &SchemaRef) -> Result<Encoder<W>, ArrowError> {
        Ok(match format {
            TypedFormat::Parquet => {
                // Dictionary pages for the text columns only: on the numbers they cost more time
                // than zstd leaves them space to save.
                let mut props = WriterProperties::builder()
                    .set_compression(Compression::ZSTD(ZstdLevel::default()))
                    .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
                    .set_dictionary_enabled(false)
                    .set_created_by(format!("sonde {}", env!("CARGO_PKG_VERSION")));
                for field in schema.fields().iter().filter(|f| matches!(f.data_type(), DataType::Dictionary(..))) {
                    props = props.set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), true);
                }
                Encoder::Parquet(ArrowWriter::try_new(w, parquet_schema(schema), Some(props.build()))?)
            }
            TypedFormat::Arrow => {
                let plain = plain_text(schema);
                let options = IpcWriteOptions::default().try_with_compression(Some(CompressionType::ZSTD))?;
                Encoder::Arrow(FileWriter::try_new_with_options(w, &plain, options)?, plain)
            }
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        match self {
            Encoder::Parquet(w) => {
                w.write(&parquet_batch(batch)?)?;
                // A row group of wide TCP rows would buffer some 100 MB before it is written:
                // it ends early once its columns hold this much.
                if w.memory_size() > ROW_GROUP_MEMORY {
                    w.flush()?;
                }
                Ok(())
            }
            Encoder::Arrow(w, plain) => {
                let columns = batch
                    .columns()
                    .iter()
                    .zip(plain.fields())
                    .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c.clone()) } else { cast(c, f.data_type()) })
                    .collect::<Result<Vec<_>, _>>()?;
                w.write(&RecordBatch::try_new(plain.clone(), columns)?)
            }
        }
    }

    fn finish(self) -> Result<W, ArrowError> {
        match self {
            Encoder::Parquet(w) => w.into_inner().map_err(|e| ArrowError::ExternalError(Box::new(e))),
            Encoder::Arrow(mut w, _) => {
                w.finish()?;
                w.into_inner()
            }
        }
    }
}

/// `schema` with every dictionary of strings as plain strings (metadata kept).
fn plain_text(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, values) => f.as_ref().clone().with_data_type(values.as_ref().clone()),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}
