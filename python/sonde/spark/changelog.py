"""The merge jobs' output: append-only Parquet changelogs written by Spark's own writer.

A changelog is a directory of Parquet files; each micro-batch appends the new state of the keys
it changed, with `batch` (the micro-batch id, increasing), so the row with the highest `batch` per
key is the view (docs/spark.md, "The output"). Here a batch's rows are a Spark DataFrame, written
by the executors (`DataFrameWriter.parquet`, zstd) into a hidden directory and then moved into
place under names that carry the batch (`part-00000042-000.parquet`) through the Hadoop
FileSystem API, so that:

- no reader (`sonde serve --merged`, DuckDB, Spark) sees half a file: Spark writes under
  `_batch-…/_temporary`, and names starting with `_` or `.` are skipped by every reader;
- a batch Spark runs again after a crash replaces its own files instead of adding a copy;
- the file count stays bounded: every `every` batches a directory's single-batch files are
  compacted, by a Spark job, into one set of files holding each key's newest row (batch numbers
  kept, so the view does not change).

Nothing here brings rows to the driver: the driver only lists, renames and deletes files.
"""

from __future__ import annotations

import re
from typing import List, Sequence

BATCH_FILE = re.compile(r"^part-(\d{8,})-(\d{3,})\.parquet$")
COMPACT_FILE = re.compile(r"^part-(\d{8,})-compact-(\d{3,})\.parquet$")


class Files:
    """A directory tree on whatever file system Spark writes to (local, HDFS, S3…), through the
    JVM's Hadoop FileSystem."""

    def __init__(self, spark, root: str):
        self.jvm = spark._jvm
        self.root = root
        self.fs = self.path(root).getFileSystem(spark._jsc.hadoopConfiguration())

    def path(self, *parts: str):
        return self.jvm.org.apache.hadoop.fs.Path("/".join(parts))

    def names(self, directory: str) -> List[str]:
        p = self.path(directory)
        if not self.fs.exists(p):
            return []
        return sorted(s.getPath().getName() for s in self.fs.listStatus(p))

    def move_parts(self, source: str, directory: str, stem: str) -> int:
        """Moves the Parquet parts Spark wrote into `source` to `directory/stem-NNN.parquet`,
        replacing files of that stem left by an earlier attempt, then removes `source`."""
        earlier = re.compile(re.escape(stem) + r"-\d{3,}\.parquet$")
        for old in self.names(directory):
            if earlier.match(old):
                self.fs.delete(self.path(directory, old), False)
        parts = [n for n in self.names(source) if n.startswith("part-") and n.endswith(".parquet")]
        for i, name in enumerate(parts):
            self.fs.rename(self.path(source, name), self.path(directory, f"{stem}-{i:03d}.parquet"))
        self.fs.delete(self.path(source), True)
        return len(parts)

    def delete(self, directory: str, names: Sequence[str]) -> None:
        for name in names:
            self.fs.delete(self.path(directory, name), False)


def write(files: Files, df, table: str, batch: int) -> None:
    """Appends `df` (a batch's rows of one table, `batch` among its columns) to the changelog
    `table` under the root, as that batch's files. A DataFrame without rows writes nothing."""
    directory = f"{files.root}/{table}"
    staging = f"{directory}/_batch-{batch:08d}"
    df.write.mode("overwrite").option("compression", "zstd").parquet(staging)
    files.fs.mkdirs(files.path(directory))
    # Spark writes one file holding only the schema for a DataFrame without rows: not moved.
    for name in files.names(staging):
        if name.startswith("part-") and name.endswith(".parquet") and not _has_rows(files, staging, name):
            files.fs.delete(files.path(staging, name), False)
    files.move_parts(staging, directory, f"part-{batch:08d}")


def _has_rows(files: Files, directory: str, name: str) -> bool:
    """Whether a Parquet file Spark wrote holds rows (its footer's row count, read by the JVM's
    Parquet reader: no data is read)."""
    jvm = files.jvm
    conf = files.fs.getConf()
    input_file = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(files.path(directory, name), conf)
    reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(input_file)
    try:
        return reader.getRecordCount() > 0
    finally:
        reader.close()


def compact(spark, files: Files, table: str, key: Sequence[str], every: int) -> int:
    """Once `table` holds `every` single-batch files or more, replaces them by the newest row per
    key among them (a Spark job: window over the key, highest batch), written before they are
    deleted (a reader that finds a file gone lists again). Returns the files removed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    directory = f"{files.root}/{table}"
    singles = [n for n in files.names(directory) if BATCH_FILE.match(n)]
    if every <= 0 or len(singles) < every:
        return 0
    last = max(int(BATCH_FILE.match(n).group(1)) for n in singles)
    rows = spark.read.parquet(*[f"{directory}/{n}" for n in singles])
    newest = Window.partitionBy(*key).orderBy(F.col("batch").desc())
    kept = (rows.withColumn("_rank", F.row_number().over(newest)).where(F.col("_rank") == 1).drop("_rank")
            .orderBy("batch", *key))
    staging = f"{directory}/_compact-{last:08d}"
    kept.coalesce(1).write.mode("overwrite").option("compression", "zstd").parquet(staging)
    files.move_parts(staging, directory, f"part-{last:08d}-compact")
    files.delete(directory, singles)
    return len(singles)
