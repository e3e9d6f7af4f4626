//! Typed output files: Parquet (zstd) and Arrow IPC (zstd), each written whole or not at all.

use std::io::{BufWriter, Write};
use std::path::Path;

use arrow::error::ArrowError;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::ipc::CompressionType;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use sonde_output::{OutputError, OutputFile, PendingFile};

/// Rows per Parquet row group: a flow log's groups hold some 10–20 MB before compression.
const ROW_GROUP_ROWS: usize = 65_536;

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
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), OutputError> {
    let failed = |reason: String| OutputError { path: path.to_path_buf(), reason };
    let pending = PendingFile::create(path, true).map_err(|e| failed(format!("cannot create: {e}")))?;
    let mut w = BufWriter::with_capacity(1 << 16, pending);
    let schema = batches.first().map_or_else(|| schema.clone(), RecordBatch::schema);
    encode(&mut w, format, &schema, batches).map_err(|e| failed(format!("write failed: {e}")))?;
    let pending = w.into_inner().map_err(|e| failed(format!("write failed: {}", e.error())))?;
    pending.commit(true).map_err(|e| failed(format!("write failed: {e}")))
}

fn encode<W: Write + Send>(
    w: &mut W,
    format: TypedFormat,
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), ArrowError> {
    match format {
        TypedFormat::Parquet => {
            let props = WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
                .set_created_by(format!("sonde {}", env!("CARGO_PKG_VERSION")))
                .build();
            let mut writer = ArrowWriter::try_new(w, schema.clone(), Some(props))?;
            for batch in batches {
                writer.write(batch)?;
            }
            writer.close()?;
        }
        TypedFormat::Arrow => {
            let options = IpcWriteOptions::default().try_with_compression(Some(CompressionType::ZSTD))?;
            let mut writer = FileWriter::try_new_with_options(w, schema, options)?;
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
        }
    }
    Ok(())
}
