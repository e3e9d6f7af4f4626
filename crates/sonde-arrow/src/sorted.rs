//! A typed flow log's rows until it is written in output order — what sonde-output's sorted
//! lines are for the TSV: sorted batches in memory up to a budget, beyond it sorted runs in
//! unnamed temporary files (Arrow IPC streams, zstd), merged when the log is written. Every
//! batch here carries each row's order key ([`OrderKey::to_bytes`], whose byte order is the
//! key order) as a last column, so runs merge by comparing bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::sync::Arc;

use arrow::array::{Array, FixedSizeBinaryArray, UInt32Array};
use arrow::compute::{interleave_record_batch, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
use arrow::ipc::CompressionType;
use arrow::record_batch::RecordBatch;
use sonde_output::sorted::{compact_runs, replace_by_merge, RunFile, RunReader};
use sonde_output::{OrderKey, SortBuffer, Spilled};

/// The order key column of a keyed batch (never in a file a user reads).
const KEY_COLUMN: &str = "sonde_order_key";

/// Runs of one level merged into one of the next: twice the TSV lines' fan-in, as a typed row
/// costs more to rewrite than the memory of the merge's batches (a small batch per run).
const FAN_IN: usize = 16;

/// Rows per batch a merge hands to a file (the Parquet writer gathers them into row groups):
/// some 10 MB of TCP rows.
pub(crate) const MERGED_ROWS: usize = 8_192;

/// Rows per batch in a run: a merge holds one batch per run, so that [`FAN_IN`] of them take
/// half the budget (a TCP row is about 1.2 KB in memory), within limits that keep the batches
/// worth compressing.
fn run_rows(sort: &SortBuffer) -> usize {
    (sort.bytes / (2 * FAN_IN * 1_200)).clamp(128, 4_096)
}

/// `batch` sorted by `keys`, each row's key bytes in a last column. The sort is stable: equal
/// keys keep the order the rows came in.
pub(crate) fn keyed(keys: &[OrderKey], batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let mut order: Vec<(OrderKey, u32)> = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let row = u32::try_from(i).map_err(|_| ArrowError::ComputeError("over 4G rows in one batch".into()))?;
        order.push((*key, row));
    }
    order.sort_by_key(|&(key, _)| key);
    let sorted = take_record_batch(batch, &UInt32Array::from_iter_values(order.iter().map(|&(_, i)| i)))?;
    let key_bytes = FixedSizeBinaryArray::try_from_iter(order.iter().map(|(key, _)| key.to_bytes()))?;
    let schema = sorted.schema();
    let mut fields = schema.fields().to_vec();
    fields.push(Arc::new(Field::new(KEY_COLUMN, DataType::FixedSizeBinary(OrderKey::BYTES as i32), false)));
    let mut columns = sorted.columns().to_vec();
    columns.push(Arc::new(key_bytes));
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())), columns)
}

/// `batch` without its key column.
pub(crate) fn unkeyed(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let n = batch.num_columns();
    if n == 0 || batch.schema().field(n - 1).name() != KEY_COLUMN {
        return Ok(batch.clone());
    }
    batch.project(&(0..n - 1).collect::<Vec<_>>())
}

/// One typed flow log's rows: sorted keyed batches in memory, sorted runs on disk.
#[derive(Debug, Default)]
pub(crate) struct SortedRows {
    memory: Vec<RecordBatch>,
    memory_bytes: usize,
    runs: Vec<RunFile>,
}

impl SortedRows {
    /// Adds a keyed batch ([`keyed`]).
    pub(crate) fn push(&mut self, batch: RecordBatch) {
        if batch.num_rows() > 0 {
            self.memory_bytes += batch.get_array_memory_size();
            self.memory.push(batch);
        }
    }

    pub(crate) fn absorb(&mut self, other: SortedRows) {
        self.memory.extend(other.memory);
        self.memory_bytes += other.memory_bytes;
        self.runs.extend(other.runs);
    }

    pub(crate) fn len(&self) -> usize {
        self.memory.iter().map(RecordBatch::num_rows).sum::<usize>()
            + self.runs.iter().map(|r| r.items as usize).sum::<usize>()
    }

    pub(crate) fn held_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// Writes the rows in memory to one new run, then merges runs while a level has
    /// [`FAN_IN`] of them.
    pub(crate) fn spill(&mut self, sort: &SortBuffer, spilled: &mut Spilled) -> Result<(), ArrowError> {
        if !self.memory.is_empty() {
            let cursors = self.memory.iter().map(|b| Cursor::Memory(Some(b.clone()))).collect();
            let run = write_run(sort, 0, cursors)?;
            spilled.runs += 1;
            spilled.bytes += run.bytes;
            self.runs.push(run);
            self.memory.clear();
            self.memory_bytes = 0;
        }
        self.compact(sort, spilled)
    }

    pub(crate) fn compact(&mut self, sort: &SortBuffer, spilled: &mut Spilled) -> Result<(), ArrowError> {
        compact_runs(&mut self.runs, FAN_IN, spilled, |group, level| merge_runs(sort, group, level))
    }

    /// Merges the smallest runs until at most [`FAN_IN`] are left: a merge holds a batch per
    /// run, so the final one stays as small as the others.
    pub(crate) fn narrow(&mut self, sort: &SortBuffer, spilled: &mut Spilled) -> Result<(), ArrowError> {
        while self.runs.len() > FAN_IN {
            self.runs.sort_by_key(|r| std::cmp::Reverse(r.items));
            let group = self.runs.split_off(self.runs.len() - FAN_IN);
            let level = group.iter().map(|r| r.level).max().unwrap_or(0) + 1;
            replace_by_merge(&mut self.runs, group, level, spilled, &mut |group, level| {
                merge_runs(sort, group, level)
            })?;
        }
        Ok(())
    }

    /// Every row of `parts`, in output order, as keyed batches of up to `rows` rows.
    pub(crate) fn merged(
        parts: &[&SortedRows],
        rows: usize,
        out: impl FnMut(RecordBatch) -> Result<(), ArrowError>,
    ) -> Result<(), ArrowError> {
        let mut cursors = Vec::new();
        for part in parts {
            cursors.extend(part.memory.iter().map(|b| Cursor::Memory(Some(b.clone()))));
            for run in &part.runs {
                cursors.push(Cursor::run(run)?);
            }
        }
        merge(cursors, rows, out)
    }
}

/// Where the next batch of a merge comes from.
enum Cursor<'a> {
    /// A sorted batch in memory (taken when read).
    Memory(Option<RecordBatch>),
    Run(Box<StreamReader<BufReader<RunReader<'a>>>>),
}

impl<'a> Cursor<'a> {
    fn run(run: &'a RunFile) -> Result<Cursor<'a>, ArrowError> {
        let reader = BufReader::with_capacity(1 << 16, run.reader());
        Ok(Cursor::Run(Box::new(StreamReader::try_new(reader, None)?)))
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        loop {
            let batch = match self {
                Cursor::Memory(batch) => batch.take(),
                Cursor::Run(reader) => reader.next().transpose()?,
            };
            match batch {
                Some(b) if b.num_rows() == 0 => continue,
                other => return Ok(other),
            }
        }
    }
}

/// A cursor's batch being merged.
struct Head {
    /// Its place in the merge's list of batches.
    slot: usize,
    row: usize,
    keys: FixedSizeBinaryArray,
}

/// The k-way merge of sorted keyed batches: `out` gets keyed batches of up to `rows` rows, in
/// output order (key, then the cursor's place: equal keys keep the parts' order).
fn merge(
    mut cursors: Vec<Cursor>,
    rows: usize,
    mut out: impl FnMut(RecordBatch) -> Result<(), ArrowError>,
) -> Result<(), ArrowError> {
    let mut batches: Vec<RecordBatch> = Vec::new();
    let mut heads: Vec<Option<Head>> = Vec::with_capacity(cursors.len());
    let mut heap = BinaryHeap::with_capacity(cursors.len());
    let start = |batch: RecordBatch, batches: &mut Vec<RecordBatch>| -> Result<Head, ArrowError> {
        let keys = batch
            .columns()
            .last()
            .and_then(|c| c.as_any().downcast_ref::<FixedSizeBinaryArray>())
            .cloned()
            .ok_or_else(|| ArrowError::SchemaError("a sorted batch without its key column".into()))?;
        batches.push(batch);
        Ok(Head { slot: batches.len() - 1, row: 0, keys })
    };
    for (i, cursor) in cursors.iter_mut().enumerate() {
        let head = match cursor.next_batch()? {
            Some(batch) => Some(start(batch, &mut batches)?),
            None => None,
        };
        if let Some(h) = &head {
            heap.push(Reverse((key_at(&h.keys, 0), i)));
        }
        heads.push(head);
    }
    let mut picked: Vec<(usize, usize)> = Vec::with_capacity(rows.min(MERGED_ROWS));
    while let Some(Reverse((_, i))) = heap.pop() {
        let head = heads[i].as_mut().expect("a cursor in the heap has a batch");
        picked.push((head.slot, head.row));
        head.row += 1;
        if head.row == head.keys.len() {
            heads[i] = match cursors[i].next_batch()? {
                Some(batch) => Some(start(batch, &mut batches)?),
                None => None,
            };
        }
        if let Some(h) = &heads[i] {
            heap.push(Reverse((key_at(&h.keys, h.row), i)));
        }
        if picked.len() == rows {
            flush(&mut batches, &mut heads, &mut picked, &mut out)?;
        }
    }
    if !picked.is_empty() {
        flush(&mut batches, &mut heads, &mut picked, &mut out)?;
    }
    Ok(())
}

fn key_at(keys: &FixedSizeBinaryArray, row: usize) -> [u8; OrderKey::BYTES] {
    keys.value(row).try_into().expect("keys are OrderKey::BYTES long")
}

/// Hands out the rows picked, then keeps only the batches the cursors are still in.
fn flush(
    batches: &mut Vec<RecordBatch>,
    heads: &mut [Option<Head>],
    picked: &mut Vec<(usize, usize)>,
    out: &mut impl FnMut(RecordBatch) -> Result<(), ArrowError>,
) -> Result<(), ArrowError> {
    let refs: Vec<&RecordBatch> = batches.iter().collect();
    out(interleave_record_batch(&refs, picked)?)?;
    picked.clear();
    let mut kept = Vec::with_capacity(heads.len());
    for head in heads.iter_mut().flatten() {
        kept.push(batches[head.slot].clone());
        head.slot = kept.len() - 1;
    }
    *batches = kept;
    Ok(())
}

/// Writes the merge of `cursors` to a new run.
/// Writes the merge of `group` to a new run of `level`.
fn merge_runs(sort: &SortBuffer, group: &[RunFile], level: u32) -> Result<RunFile, ArrowError> {
    write_run(sort, level, group.iter().map(Cursor::run).collect::<Result<Vec<_>, _>>()?)
}

fn write_run(sort: &SortBuffer, level: u32, cursors: Vec<Cursor>) -> Result<RunFile, ArrowError> {
    let mut file = Some(BufWriter::with_capacity(1 << 16, tempfile::tempfile_in(&sort.dir)?));
    // zstd's fastest level: a fifth of the bytes, at less cost than the writes it saves
    // (LZ4 here decoded slower than zstd).
    let options = IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::ZSTD))?
        .try_with_compression_level(Some(1))?;
    // Made with the first batch's schema (the anonymised logs mark `*_iscrypto`).
    let mut writer: Option<StreamWriter<BufWriter<File>>> = None;
    let mut rows = 0u64;
    merge(cursors, run_rows(sort), |batch| {
        rows += batch.num_rows() as u64;
        let w = match (&mut writer, file.take()) {
            (Some(w), _) => w,
            (None, Some(f)) => writer.insert(StreamWriter::try_new_with_options(f, &batch.schema(), options.clone())?),
            (None, None) => unreachable!("the file goes to the writer"),
        };
        w.write(&batch)
    })?;
    let w = match (writer, file) {
        (Some(writer), _) => writer.into_inner()?,
        (None, Some(f)) => f,
        (None, None) => unreachable!("the file goes to the writer"),
    };
    let file = w.into_inner().map_err(|e| ArrowError::IoError(e.to_string(), e.into_error()))?;
    let bytes = file.metadata()?.len();
    Ok(RunFile { file, bytes, items: rows, level })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{StringArray, UInt64Array};

    fn key(first_ns: u64) -> OrderKey {
        let mut bytes = [0u8; OrderKey::BYTES];
        bytes[..8].copy_from_slice(&first_ns.to_be_bytes());
        OrderKey::from_bytes(&bytes)
    }

    fn batch(values: &[u64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("v", DataType::UInt64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let text: Vec<String> = values.iter().map(|v| format!("t{v}")).collect();
        RecordBatch::try_new(
            schema,
            vec![Arc::new(UInt64Array::from(values.to_vec())), Arc::new(StringArray::from(text))],
        )
        .unwrap()
    }

    fn values(parts: &[&SortedRows], rows: usize) -> Vec<u64> {
        let mut got = Vec::new();
        SortedRows::merged(parts, rows, |b| {
            assert!(b.num_rows() <= rows);
            let b = unkeyed(&b).unwrap();
            assert_eq!(b.num_columns(), 2);
            got.extend(b.column(0).as_any().downcast_ref::<UInt64Array>().unwrap().values().iter().copied());
            Ok(())
        })
        .unwrap();
        got
    }

    /// Batches in any order, spilled into runs and merged at several levels, come out in key
    /// order, every row once.
    #[test]
    fn runs_merge_into_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let sort = SortBuffer { dir: dir.path().to_path_buf(), bytes: 0 };
        let (mut a, mut b) = (SortedRows::default(), SortedRows::default());
        let mut spilled = Spilled::default();
        let mut x = 3u64;
        let mut all: Vec<u64> = Vec::new();
        for i in 0..201 {
            let vals: Vec<u64> = (0..37)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    x >> 44
                })
                .collect();
            all.extend(&vals);
            let keys: Vec<OrderKey> = vals.iter().map(|&v| key(v)).collect();
            let part = if i % 2 == 0 { &mut a } else { &mut b };
            part.push(keyed(&keys, &batch(&vals)).unwrap());
            if i % 3 == 0 {
                part.spill(&sort, &mut spilled).unwrap();
            }
        }
        all.sort_unstable();
        assert!(a.runs.iter().any(|r| r.level > 0), "runs were merged");
        assert!(!a.memory.is_empty(), "some rows stayed in memory");
        assert_eq!(a.len() + b.len(), all.len());
        assert_eq!(values(&[&a, &b], 1000), all);
        assert_eq!(values(&[&b, &a], 7), all, "any batch size, any order of parts");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the runs have no name");
    }
}
