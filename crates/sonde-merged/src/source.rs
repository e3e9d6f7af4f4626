//! The merge job's output directory, looked at again at each reload: the files new since the
//! previous look are read and applied to the view.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::read::{read_file, Changelog};
use crate::view::{Counters, Limits, MergedView};

/// A merged output directory and the view read from it so far.
#[derive(Debug)]
pub struct Source {
    dir: PathBuf,
    /// The files read whole, by changelog and name: never read again. A name is forgotten once
    /// its file has left the directory (the job's retention, or the operator's), so this holds
    /// what the directory holds, not every file the run has seen.
    read: HashSet<(Changelog, OsString)>,
    view: MergedView,
}

impl Source {
    /// A source reading `dir` (which must be a directory; its four subdirectories may appear
    /// later). Nothing is read before the first [`Source::reload`].
    pub fn open(dir: &Path, limits: Limits) -> io::Result<Source> {
        if !std::fs::metadata(dir)?.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a directory", dir.display())));
        }
        Ok(Source { dir: dir.to_path_buf(), read: HashSet::new(), view: MergedView::new(limits) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn view(&self) -> &MergedView {
        &self.view
    }

    /// Reads the files that appeared since the previous reload, newest first (by modification
    /// time, then name), and lets the oldest intervals go beyond `max_intervals`; whether the
    /// view changed (rows, intervals, or what reading met: files read, failures, rows dropped).
    ///
    /// Newest first, so that a first look at a long history keeps the newest intervals and
    /// drops (counts) the rows older than them, with memory within twice the limit.
    pub fn reload(&mut self) -> bool {
        let max_intervals = self.view.limits().max_intervals;
        let before = self.view.counters.clone();
        self.view.counters.reloads += 1;
        let mut unreadable = 0;
        let mut changed = false;
        for log in Changelog::ALL {
            let listed = candidates(&self.dir.join(log.dir()));
            let names: HashSet<&OsString> = listed.iter().map(|(_, name)| name).collect();
            self.read.retain(|(l, name)| *l != log || names.contains(name));
            for (path, name) in listed {
                if self.read.contains(&(log, name.clone())) {
                    continue;
                }
                match read_file(&path, log) {
                    Ok(file) => {
                        let c = &mut self.view.counters;
                        c.files_read += 1;
                        c.rows_dropped += file.nulls;
                        changed |= self.view.apply(file.rows);
                        self.read.insert((log, name));
                        // A first look at a long history: within twice the limit.
                        if self.view.held_intervals() > max_intervals.saturating_mul(2) {
                            self.view.evict();
                        }
                    }
                    Err(e) => {
                        unreadable += 1;
                        let c = &mut self.view.counters;
                        c.read_failures += 1;
                        c.last_failure = Some(format!("{}: {e}", path.display()));
                    }
                }
            }
        }
        changed |= self.view.evict();
        let c = &mut self.view.counters;
        c.files_unreadable = unreadable;
        changed || Counters { reloads: before.reloads, ..c.clone() } != before
    }
}

/// The Parquet files of `dir` a reader looks at (names ending `.parquet`, not starting with `_`
/// or `.`), newest first; none when `dir` is missing or unreadable (the job has not written it
/// yet).
fn candidates(dir: &Path) -> Vec<(PathBuf, OsString)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<(SystemTime, OsString, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let text = name.to_string_lossy();
            if text.starts_with('_') || text.starts_with('.') || !text.ends_with(".parquet") {
                return None;
            }
            // Followed through a link; a file gone since the listing is left for the next look.
            let meta = std::fs::metadata(e.path()).ok().filter(|m| m.is_file())?;
            Some((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), name, e.path()))
        })
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files.into_iter().map(|(_, name, path)| (path, name)).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::ArrowWriter;

    use super::*;

    fn write_hosts(path: &Path, start: f64) {
        let d = |v: f64| Arc::new(Float64Array::from(vec![v])) as ArrayRef;
        let l = |v: i64| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
        let batch = RecordBatch::try_from_iter([
            ("batch", l(1)),
            ("addr", Arc::new(StringArray::from(vec!["10.0.0.1"])) as ArrayRef),
            ("start", d(start)),
            ("end", d(start + 60.0)),
            ("pkts_in", l(2)),
            ("bytes_in", l(200)),
            ("pkts_out", l(3)),
            ("bytes_out", l(300)),
            ("flows", l(1)),
        ])
        .unwrap();
        let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn the_names_of_files_read_are_forgotten_when_the_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join(Changelog::Hosts.dir());
        std::fs::create_dir(&hosts).unwrap();
        let mut source = Source::open(dir.path(), Limits::default()).unwrap();
        for (i, start) in [60.0, 120.0, 180.0].into_iter().enumerate() {
            write_hosts(&hosts.join(format!("part-{i}.parquet")), start);
        }
        assert!(source.reload());
        assert_eq!((source.read.len(), source.view.counters.files_read), (3, 3));
        // Read once: a reload with nothing new reads nothing.
        source.reload();
        assert_eq!(source.view.counters.files_read, 3);
        // The job's retention takes two away: their names go with them, the third is kept
        // (and not read again).
        std::fs::remove_file(hosts.join("part-0.parquet")).unwrap();
        std::fs::remove_file(hosts.join("part-1.parquet")).unwrap();
        source.reload();
        assert_eq!((source.read.len(), source.view.counters.files_read), (1, 3));
        write_hosts(&hosts.join("part-3.parquet"), 240.0);
        source.reload();
        assert_eq!((source.read.len(), source.view.counters.files_read), (2, 4));
    }
}
