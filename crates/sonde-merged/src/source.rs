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
    /// The files read whole, by changelog and name: never read again.
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
            for (path, name) in candidates(&self.dir.join(log.dir())) {
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
