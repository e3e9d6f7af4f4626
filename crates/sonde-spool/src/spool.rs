//! The spool: where each chunk goes, how it is written, and what each location holds.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sonde_output::PendingFile;

use crate::error::{Failure, SpoolError};
use crate::location::Location;
use crate::manifest::{self, name_problem, Entry, MANIFEST_NAME, MANIFEST_TMP_NAME, PART_SUFFIX};

/// Where a chunk went.
#[derive(Debug)]
pub struct Placed {
    /// Index into the locations given to [`Spool::open`].
    pub location_index: usize,
    /// `<location>/<chunk>`.
    pub dir: PathBuf,
    pub bytes: u64,
    /// No location had room: it went to the one with the most room left, past its quota.
    pub over_quota: bool,
    /// Locations tried first that failed (the caller warns about them).
    pub failed: Vec<Failure>,
}

/// A file found by [`Spool::open`] that no manifest lists: what an interrupted chunk left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub path: PathBuf,
    pub bytes: u64,
    /// `true`: a `.part` file or the manifest's temporary file, never complete, so removed.
    /// `false`: a whole file (renamed, but its chunk was never listed): kept, not counted.
    pub removed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationStats {
    pub path: PathBuf,
    /// Bytes of the listed files still there, as of the last placement (or `open`).
    pub used_bytes: u64,
    pub quota_bytes: Option<u64>,
    pub chunks_written: u64,
    pub bytes_written: u64,
    pub failed_attempts: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolStats {
    pub locations: Vec<LocationStats>,
    /// Chunks written past every quota (no location had room).
    pub over_quota_chunks: u64,
}

struct Slot {
    location: Location,
    /// The directory's device and inode when opened: a location unmounted (its empty mount
    /// point left) or replaced mid-run is not the one opened, and takes no chunk.
    identity: (u64, u64),
    /// The manifest as it will next be written: listed files not seen gone, each chunk's lines
    /// together.
    entries: Vec<Entry>,
    /// Every listed chunk, with what its directory looked like when its files were last stat'd.
    seen: HashMap<String, ChunkSeen>,
    used_bytes: u64,
    chunks_written: u64,
    bytes_written: u64,
    failed_attempts: u64,
}

struct ChunkSeen {
    /// `None`: not known (a chunk just written), so its files are stat'd next time.
    dir_mtime: Option<SystemTime>,
    checked_at: SystemTime,
    present_bytes: u64,
}

/// A directory modified this close to the time its files were stat'd may change again without
/// its mtime changing (coarse file-system clocks), so its files are stat'd again next time.
const RACY_MARGIN: Duration = Duration::from_secs(2);

impl ChunkSeen {
    fn still_valid(&self, dir_mtime: Option<SystemTime>) -> bool {
        dir_mtime.is_some()
            && self.dir_mtime == dir_mtime
            && dir_mtime.and_then(|t| t.checked_add(RACY_MARGIN)).is_some_and(|t| t < self.checked_at)
    }
}

/// A directory's device and inode.
fn identity(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path)?;
    Ok((meta.dev(), meta.ino()))
}

impl Slot {
    /// Fails unless the location is still the directory [`Spool::open`] found.
    fn check_identity(&self) -> Result<(), Failure> {
        let path = &self.location.path;
        let fail = |error| Failure { location: path.clone(), action: "checking", path: path.clone(), error };
        match identity(path) {
            Ok(now) if now == self.identity => Ok(()),
            Ok(_) => Err(fail(io::Error::other(
                "no longer the directory the spool opened (unmounted or replaced): not written there",
            ))),
            Err(error) => Err(fail(error)),
        }
    }

    fn fits(&self, chunk_bytes: u64) -> bool {
        match self.location.quota_bytes {
            None => true,
            Some(quota) => self.used_bytes.checked_add(chunk_bytes).is_some_and(|total| total <= quota),
        }
    }

    fn room_bytes(&self) -> u64 {
        self.location.quota_bytes.map_or(u64::MAX, |quota| quota.saturating_sub(self.used_bytes))
    }

    /// Re-checks the listed files: one moved away leaves the manifest and frees its bytes. A
    /// chunk directory gone drops the whole chunk; one whose mtime has not changed since its
    /// files were last stat'd (removing or renaming a file changes it) keeps its count, so a
    /// placement costs one stat per chunk, not per file. A file changed in place is not seen.
    fn refresh_usage(&mut self, now: SystemTime) {
        let location = &self.location.path;
        let mut kept = Vec::with_capacity(self.entries.len());
        let mut seen = HashMap::with_capacity(self.seen.len());
        let mut used_bytes = 0u64;
        let mut rest = std::mem::take(&mut self.entries).into_iter().peekable();
        while let Some(first) = rest.next() {
            let chunk = first.chunk.clone();
            let mut group = vec![first];
            while let Some(entry) = rest.next_if(|e| e.chunk == chunk) {
                group.push(entry);
            }
            let dir = location.join(&chunk);
            let dir_mtime = match fs::symlink_metadata(&dir) {
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(_) => None,
                Ok(meta) => meta.modified().ok(),
            };
            let cached = self.seen.remove(&chunk).filter(|s| s.still_valid(dir_mtime));
            let chunk_seen = cached.unwrap_or_else(|| {
                let mut present_bytes = 0u64;
                group.retain(|e| match fs::symlink_metadata(dir.join(&e.file)) {
                    Ok(meta) => {
                        present_bytes = present_bytes.saturating_add(meta.len());
                        true
                    }
                    Err(error) if error.kind() == io::ErrorKind::NotFound => false,
                    // Cannot tell: assume it is still there, so the quota is not overrun.
                    Err(_) => {
                        present_bytes = present_bytes.saturating_add(e.bytes);
                        true
                    }
                });
                ChunkSeen { dir_mtime, checked_at: now, present_bytes }
            });
            if group.is_empty() {
                continue;
            }
            used_bytes = used_bytes.saturating_add(chunk_seen.present_bytes);
            kept.append(&mut group);
            seen.insert(chunk, chunk_seen);
        }
        self.entries = kept;
        self.seen = seen;
        self.used_bytes = used_bytes;
    }
}

/// Rotated outputs across locations with byte quotas (see the crate documentation).
pub struct Spool {
    slots: Vec<Slot>,
    leftovers: Vec<Leftover>,
    over_quota_chunks: u64,
}

impl Spool {
    /// Checks every location (creates missing directories, must be writable), reads each
    /// manifest (a restarted monitor continues: listed files count in usage), removes `.part`
    /// files of interrupted chunks and reports them and any whole file no manifest lists
    /// ([`Spool::leftovers`]).
    pub fn open(locations: Vec<Location>) -> Result<Spool, SpoolError> {
        if locations.is_empty() {
            return Err(SpoolError::NoLocations);
        }
        let mut slots: Vec<Slot> = Vec::with_capacity(locations.len());
        let mut canonical: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(locations.len());
        let mut leftovers = Vec::new();
        for location in locations {
            let path = location.path.clone();
            let fail = |action| {
                let path = path.clone();
                move |error| SpoolError::Location { path, action, error }
            };
            fs::create_dir_all(&path).map_err(fail("creating the directory"))?;
            let real = fs::canonicalize(&path).map_err(fail("resolving the path"))?;
            if let Some((_, other)) = canonical.iter().find(|(r, _)| real.starts_with(r) || r.starts_with(&real)) {
                return Err(SpoolError::OverlappingLocations { location: path, other: other.clone() });
            }
            canonical.push((real, path.clone()));
            let probe = path.join(format!(".sonde-spool-probe-{}", std::process::id()));
            // A new file: a link of that name is refused, never written through.
            let _ = fs::remove_file(&probe);
            File::create_new(&probe).and_then(|_| fs::remove_file(&probe)).map_err(fail("checking it is writable"))?;
            let identity = identity(&path).map_err(fail("resolving the path"))?;
            let manifest_path = path.join(MANIFEST_NAME);
            let entries = match fs::read_to_string(&manifest_path) {
                Ok(text) => manifest::read(&text).map_err(|(line, problem)| SpoolError::Manifest {
                    path: manifest_path,
                    line,
                    problem,
                })?,
                Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(error) => return Err(fail("reading the manifest")(error)),
            };
            scan_leftovers(&path, &entries, &mut leftovers).map_err(fail("looking for interrupted chunks"))?;
            let mut slot = Slot {
                location,
                identity,
                entries: group_by_chunk(entries),
                seen: HashMap::new(),
                used_bytes: 0,
                chunks_written: 0,
                bytes_written: 0,
                failed_attempts: 0,
            };
            slot.refresh_usage(SystemTime::now());
            slots.push(slot);
        }
        Ok(Spool { slots, leftovers, over_quota_chunks: 0 })
    }

    /// What interrupted chunks left, found by [`Spool::open`].
    pub fn leftovers(&self) -> &[Leftover] {
        &self.leftovers
    }

    /// Writes one chunk into `<location>/<chunk_name>/`: each file as `name.part`, fsync, rename
    /// to `name`; then the location's manifest lists them. The location is the first, in the
    /// order given, whose usage plus this chunk fits its quota; if none has room, the one with
    /// the most room left (flagged `over_quota`). A location that fails is cleaned up and the
    /// next one tried; only if all fail is this an error, naming each failure.
    pub fn write_chunk(
        &mut self,
        chunk_name: &str,
        first_ns: u64,
        end_ns: u64,
        files: &[(&str, &[u8])],
    ) -> Result<Placed, SpoolError> {
        check_name(chunk_name)?;
        for (i, (name, _)) in files.iter().enumerate() {
            check_name(name)?;
            if files[..i].iter().any(|(other, _)| other == name) {
                return Err(SpoolError::InvalidName { name: name.to_string(), problem: "given twice in the chunk" });
            }
        }
        if files.is_empty() {
            return Err(SpoolError::EmptyChunk { chunk: chunk_name.to_string() });
        }
        if first_ns > end_ns {
            return Err(SpoolError::BadSpan { first_ns, end_ns });
        }
        let now = SystemTime::now();
        // A location that is not the one opened (unmounted) keeps what it knew of its chunks.
        for slot in self.slots.iter_mut().filter(|s| s.check_identity().is_ok()) {
            slot.refresh_usage(now);
        }
        for slot in &self.slots {
            let path = slot.location.path.join(chunk_name);
            if slot.seen.contains_key(chunk_name) || path.symlink_metadata().is_ok() {
                return Err(SpoolError::ChunkExists { chunk: chunk_name.to_string(), path });
            }
        }
        let chunk_bytes = files.iter().fold(0u64, |sum, (_, data)| sum.saturating_add(data.len() as u64));
        let completed_unix_s = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut failed = Vec::new();
        for index in self.placement_order(chunk_bytes) {
            let slot = &mut self.slots[index];
            let over_quota = !slot.fits(chunk_bytes);
            let new_entries = files.iter().map(|(name, data)| Entry {
                chunk: chunk_name.to_string(),
                file: name.to_string(),
                bytes: data.len() as u64,
                first_ns,
                end_ns,
                completed_unix_s,
            });
            let listed = slot.entries.len();
            slot.entries.extend(new_entries);
            let written =
                slot.check_identity().and_then(|()| write_files(&slot.location.path, chunk_name, files, &slot.entries));
            match written {
                Ok(dir) => {
                    slot.used_bytes = slot.used_bytes.saturating_add(chunk_bytes);
                    let seen = ChunkSeen { dir_mtime: None, checked_at: now, present_bytes: chunk_bytes };
                    slot.seen.insert(chunk_name.to_string(), seen);
                    slot.chunks_written += 1;
                    slot.bytes_written += chunk_bytes;
                    self.over_quota_chunks += u64::from(over_quota);
                    return Ok(Placed { location_index: index, dir, bytes: chunk_bytes, over_quota, failed });
                }
                Err(failure) => {
                    slot.entries.truncate(listed);
                    slot.failed_attempts += 1;
                    failed.push(failure);
                }
            }
        }
        Err(SpoolError::AllFailed { chunk: chunk_name.to_string(), failures: failed })
    }

    /// Locations with room in the order given, then the others by most room left.
    fn placement_order(&self, chunk_bytes: u64) -> Vec<usize> {
        let (mut order, mut full): (Vec<usize>, Vec<usize>) =
            (0..self.slots.len()).partition(|&i| self.slots[i].fits(chunk_bytes));
        full.sort_by_key(|&i| std::cmp::Reverse(self.slots[i].room_bytes()));
        order.extend(full);
        order
    }

    pub fn stats(&self) -> SpoolStats {
        let locations = self
            .slots
            .iter()
            .map(|slot| LocationStats {
                path: slot.location.path.clone(),
                used_bytes: slot.used_bytes,
                quota_bytes: slot.location.quota_bytes,
                chunks_written: slot.chunks_written,
                bytes_written: slot.bytes_written,
                failed_attempts: slot.failed_attempts,
            })
            .collect();
        SpoolStats { locations, over_quota_chunks: self.over_quota_chunks }
    }
}

fn check_name(name: &str) -> Result<(), SpoolError> {
    match name_problem(name) {
        Some(problem) => Err(SpoolError::InvalidName { name: name.to_string(), problem }),
        None => Ok(()),
    }
}

/// Writes the chunk's directory and files and then the manifest (`entries`, the chunk's
/// included); on any failure removes whatever it created, so a failed attempt leaves nothing.
fn write_files(location: &Path, chunk: &str, files: &[(&str, &[u8])], entries: &[Entry]) -> Result<PathBuf, Failure> {
    let dir = location.join(chunk);
    let fail = |action, path: &Path| {
        let location = location.to_path_buf();
        let path = path.to_path_buf();
        move |error| Failure { location, action, path, error }
    };
    fs::create_dir(&dir).map_err(fail("creating", &dir))?;
    let mut complete: Vec<PathBuf> = Vec::with_capacity(files.len());
    let result = (|| {
        for (name, data) in files {
            // sonde-output's atomic write: `name.part` (what `leftovers` recognises), fsync,
            // rename; a failure removes the `.part` file.
            let part = dir.join(format!("{name}{PART_SUFFIX}"));
            let dest = dir.join(name);
            let mut pending = PendingFile::with_temp(&dest, &part).map_err(fail("writing", &part))?;
            pending.write_all(data).map_err(fail("writing", &part))?;
            pending.commit(true).map_err(fail("renaming", &part))?;
            complete.push(dest);
        }
        manifest::sync_dir(&dir).map_err(fail("syncing", &dir))?;
        manifest::write(location, entries).map_err(fail("writing the manifest", &location.join(MANIFEST_NAME)))
    })();
    match result {
        Ok(()) => Ok(dir),
        Err(failure) => {
            // Not listed, so not promised to anyone: this chunk goes to another location.
            for path in &complete {
                let _ = fs::remove_file(path);
            }
            let _ = fs::remove_dir(&dir);
            Err(failure)
        }
    }
}

/// Removes `.part` files and the manifest's temporary file (never complete) and reports them,
/// with any whole file in a chunk directory that the manifest does not list (kept). A chunk
/// directory that only held `.part` files is removed, so the chunk can be written again.
fn scan_leftovers(location: &Path, entries: &[Entry], leftovers: &mut Vec<Leftover>) -> io::Result<()> {
    let tmp = location.join(MANIFEST_TMP_NAME);
    if let Ok(meta) = tmp.symlink_metadata() {
        if meta.is_file() {
            fs::remove_file(&tmp)?;
            leftovers.push(Leftover { path: tmp, bytes: meta.len(), removed: true });
        }
    }
    let listed: HashSet<(&str, &str)> = entries.iter().map(|e| (e.chunk.as_str(), e.file.as_str())).collect();
    let mut dirs: Vec<(String, PathBuf)> = Vec::new();
    for item in fs::read_dir(location)? {
        let item = item?;
        if item.file_type()?.is_dir() {
            // A name that is not UTF-8 cannot be a chunk of ours.
            if let Ok(name) = item.file_name().into_string() {
                dirs.push((name, item.path()));
            }
        }
    }
    dirs.sort(); // reports in a stable order
    for (chunk, dir) in dirs {
        let mut files: Vec<(String, PathBuf, fs::Metadata)> = Vec::new();
        for item in fs::read_dir(&dir)? {
            let item = item?;
            let meta = item.metadata()?;
            if meta.is_file() {
                files.push((item.file_name().to_string_lossy().into_owned(), item.path(), meta));
            }
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut part_only = !files.is_empty();
        for (name, path, meta) in files {
            if name.ends_with(PART_SUFFIX) {
                fs::remove_file(&path)?;
                leftovers.push(Leftover { path, bytes: meta.len(), removed: true });
            } else if !listed.contains(&(chunk.as_str(), name.as_str())) {
                part_only = false;
                leftovers.push(Leftover { path, bytes: meta.len(), removed: false });
            } else {
                part_only = false;
            }
        }
        if part_only {
            let _ = fs::remove_dir(&dir);
        }
    }
    Ok(())
}

/// Puts each chunk's lines together (in the order chunks first appear), as the spool writes
/// them; a manifest edited by hand may have split them.
fn group_by_chunk(mut entries: Vec<Entry>) -> Vec<Entry> {
    let mut first_seen: HashMap<String, usize> = HashMap::new();
    for entry in &entries {
        let next = first_seen.len();
        first_seen.entry(entry.chunk.clone()).or_insert(next);
    }
    entries.sort_by_key(|e| first_seen[&e.chunk]); // stable: files keep their order
    entries
}
