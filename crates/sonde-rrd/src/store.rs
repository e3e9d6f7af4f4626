//! The store: a file of fixed size, updated in place.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use crate::cdp::CdpState;
use crate::format::{self, Layout, CDP_LEN, FIXED_LEN};
use crate::spec::{Cf, Spec};
use crate::Error;

/// Latest time (seconds since the epoch) a store accepts, about the year 8.9 million: a bound
/// that keeps every time computation far from overflow.
pub const MAX_TIME_S: u64 = 1 << 48;
/// Most rows one [`Store::fetch`] returns.
pub const MAX_FETCH_ROWS: u64 = 1 << 24;

/// An open store. See the crate documentation for the rules.
#[derive(Debug)]
pub struct Store {
    file: File,
    spec: Spec,
    start_s: u64,
    layout: Layout,
    last_update_s: u64,
    last_values: Vec<f64>,
    /// Archive-major: `cdp[a * sources + s]`.
    cdp: Vec<CdpState>,
    /// Scratch for one row and for the live state (no allocation per update).
    row_buf: Vec<u8>,
    live_buf: Vec<u8>,
}

/// The rows [`Store::fetch`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    /// The archive the rows come from (an index into [`Spec::archives`]).
    pub archive: usize,
    /// Seconds per row.
    pub resolution_s: u64,
    pub rows: Vec<Row>,
}

/// One consolidated row: the values of the `resolution_s` seconds ending at `time_s`, one per
/// data source, NaN where unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub time_s: u64,
    pub values: Vec<f64>,
}

/// All rows of one archive in time order (oldest first), as [`Store::archive_rows`] returns.
#[derive(Debug, Clone)]
pub struct ArchiveRows {
    /// End time of each row; rows before the epoch (a store created near time 0) are negative.
    pub times_s: Vec<i64>,
    /// `values[row * sources + source]`.
    pub values: Vec<f64>,
}

impl Store {
    /// Creates a new store at `path` (which must not exist) and writes the whole file at its
    /// final size: header, consolidation state and every archive's rows, all unknown.
    /// `start_s` is rounded down to a multiple of the step; the first update must be after it.
    /// The file is synced to disk before this returns.
    pub fn create(path: impl AsRef<Path>, spec: &Spec, start_s: u64) -> Result<Store, Error> {
        spec.validate().map_err(Error::InvalidSpec)?;
        if start_s > MAX_TIME_S {
            return Err(Error::TimeOutOfRange { t_s: start_s });
        }
        let start_s = start_s - start_s % spec.step_s;
        let sources = spec.sources.len();
        let layout = Layout::new(sources, &spec.archives);
        let k = start_s / spec.step_s;
        let mut cdp = Vec::with_capacity(spec.archives.len() * sources);
        for a in &spec.archives {
            // rrdtool create: the points of the first row before the start are unknown.
            let before = if a.steps == 1 { 0 } else { k % u64::from(a.steps) };
            cdp.extend(std::iter::repeat_n(CdpState::at_creation(before), sources));
        }
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        let mut store = Store {
            file,
            spec: spec.clone(),
            start_s,
            layout,
            last_update_s: start_s,
            last_values: vec![f64::NAN; sources],
            cdp,
            row_buf: vec![0; sources * 8],
            live_buf: Vec::new(),
        };
        let spec_part = format::encode_spec(spec, start_s);
        write_at(&store.file, &spec_part, 0)?;
        store.write_live()?;
        // Every row unknown, written in chunks of whole rows.
        let nan_row: Vec<u8> = std::iter::repeat_n(f64::NAN.to_le_bytes(), sources).flatten().collect();
        let chunk: Vec<u8> = nan_row.repeat((1 << 16) / nan_row.len() + 1);
        let mut at = store.layout.archive_offsets[0];
        while at < store.layout.file_len {
            let n = chunk.len().min((store.layout.file_len - at) as usize);
            write_at(&store.file, &chunk[..n], at)?;
            at += n as u64;
        }
        store.file.sync_all()?;
        Ok(store)
    }

    /// Opens an existing store and checks it: magic, version, header checksum, spec rules, file
    /// size and consolidation state. A damaged or truncated file gives an error, never a panic.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, Error> {
        Store::open_with(OpenOptions::new().read(true).write(true).open(path)?)
    }

    /// Opens an existing store for reading only (checked as [`Store::open`] checks it), e.g. to
    /// serve it while another process updates it: [`Store::update`] on it fails with
    /// [`Error::Io`]. The store is read as it is when a method is called; sonde replaces a store
    /// whole (a renamed copy), so a store opened before a replacement keeps the older file.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Store, Error> {
        Store::open_with(OpenOptions::new().read(true).open(path)?)
    }

    fn open_with(file: File) -> Result<Store, Error> {
        let found_bytes = file.metadata()?.len();
        let mut fixed_bytes = [0u8; FIXED_LEN];
        if found_bytes < FIXED_LEN as u64 {
            return Err(Error::Truncated { expected_bytes: FIXED_LEN as u64, found_bytes });
        }
        read_at(&file, &mut fixed_bytes, 0)?;
        let fixed = format::decode_fixed(&fixed_bytes)?;
        let spec_len = format::spec_len(&fixed);
        if found_bytes < spec_len as u64 {
            return Err(Error::Truncated { expected_bytes: spec_len as u64, found_bytes });
        }
        let mut spec_part = vec![0u8; spec_len];
        read_at(&file, &mut spec_part, 0)?;
        let (spec, start_s) = format::decode_spec(&spec_part, &fixed)?;
        let sources = spec.sources.len();
        let layout = Layout::new(sources, &spec.archives);
        if found_bytes < layout.file_len {
            return Err(Error::Truncated { expected_bytes: layout.file_len, found_bytes });
        }
        if found_bytes > layout.file_len {
            return Err(Error::TooLong { expected_bytes: layout.file_len, found_bytes });
        }
        let mut live = vec![0u8; layout.live_len];
        read_at(&file, &mut live, layout.live_offset)?;
        let last_update_s = format::u64_at(&live, 0);
        if last_update_s < start_s || last_update_s > MAX_TIME_S || !last_update_s.is_multiple_of(spec.step_s) {
            return Err(Error::Corrupt("the last update time is before the start or off the step grid"));
        }
        let last_values: Vec<f64> = (0..sources).map(|s| format::f64_at(&live, 8 + 8 * s)).collect();
        let k = last_update_s / spec.step_s;
        let mut cdp = Vec::with_capacity(spec.archives.len() * sources);
        let mut at = 8 + 8 * sources;
        for a in &spec.archives {
            for _ in 0..sources {
                let state = CdpState {
                    value: format::f64_at(&live, at),
                    unknown_pdps: format::u64_at(&live, at + 8),
                    primary: format::f64_at(&live, at + 16),
                    secondary: format::f64_at(&live, at + 24),
                };
                // The unknown points of the row being built are among the points it has so far.
                if state.unknown_pdps > k % u64::from(a.steps) {
                    return Err(Error::Corrupt("a consolidation state counts more unknown points than it has"));
                }
                cdp.push(state);
                at += CDP_LEN;
            }
        }
        Ok(Store {
            file,
            spec,
            start_s,
            layout,
            last_update_s,
            last_values,
            cdp,
            row_buf: vec![0; sources * 8],
            live_buf: Vec::with_capacity(live.len()),
        })
    }

    /// Opens the store at `path` if there is one (it must have been made with `spec`, else
    /// [`Error::SpecMismatch`]), otherwise creates it. How a monitor restarts on the same store.
    pub fn open_or_create(path: impl AsRef<Path>, spec: &Spec, start_s: u64) -> Result<Store, Error> {
        let path = path.as_ref();
        match Store::open(path) {
            Ok(store) if store.spec == *spec => Ok(store),
            Ok(_) => Err(Error::SpecMismatch),
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => Store::create(path, spec, start_s),
            Err(e) => Err(e),
        }
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The creation time (on the step grid).
    pub fn start_s(&self) -> u64 {
        self.start_s
    }

    /// Time of the last update (the creation time before the first one).
    pub fn last_update_s(&self) -> u64 {
        self.last_update_s
    }

    /// The values of the last update (NaN before the first one).
    pub fn last_values(&self) -> &[f64] {
        &self.last_values
    }

    /// The file's size in bytes: fixed from creation.
    pub fn file_len_bytes(&self) -> u64 {
        self.layout.file_len
    }

    /// Adds the primary point of the step ending at `t_s`: one value per data source, in spec
    /// order; NaN (and ±infinity) mean unknown.
    ///
    /// - `t_s` must be a multiple of the step ([`Error::OffGrid`] otherwise) and after the last
    ///   update ([`Error::NotAfterLastUpdate`]); a refused update changes nothing.
    /// - Steps skipped between the last update and `t_s` are unknown primary points.
    /// - Every row that completes is written in place at once, then the consolidation state in
    ///   the header. Nothing is synced: call [`Store::sync`] for durability. After an I/O error
    ///   the in-memory state is as before the call and the update may be retried.
    pub fn update(&mut self, t_s: u64, values: &[f64]) -> Result<(), Error> {
        let sources = self.spec.sources.len();
        if values.len() != sources {
            return Err(Error::ValueCount { expected: sources, got: values.len() });
        }
        if !t_s.is_multiple_of(self.spec.step_s) {
            return Err(Error::OffGrid { t_s, step_s: self.spec.step_s });
        }
        if t_s <= self.last_update_s {
            return Err(Error::NotAfterLastUpdate { t_s, last_update_s: self.last_update_s });
        }
        if t_s > MAX_TIME_S {
            return Err(Error::TimeOutOfRange { t_s });
        }
        let saved = (self.cdp.clone(), self.last_update_s, self.last_values.clone());
        let result = self.apply(t_s, values).and_then(|()| {
            self.last_update_s = t_s;
            for (last, &v) in self.last_values.iter_mut().zip(values) {
                *last = canonical(v);
            }
            self.write_live()
        });
        if result.is_err() {
            (self.cdp, self.last_update_s, self.last_values) = saved;
        }
        result
    }

    /// Syncs the file's data to disk (`fsync`). Updates are written to the OS at once; this
    /// makes them survive a crash of the machine.
    pub fn sync(&self) -> Result<(), Error> {
        self.file.sync_data()?;
        Ok(())
    }

    /// The rows of the archive of consolidation function `cf` that best matches, chosen as
    /// rrdtool fetch chooses (so a fetch here and an `rrdtool fetch` of the export agree):
    ///
    /// - among the archives of `cf` that reach back to `start_s` (their oldest row's interval
    ///   begins at or before it), the one whose resolution is closest to `resolution_s` (the
    ///   first in spec order on a tie);
    /// - if none reaches back that far, the one covering the most of [`start_s`, `end_s`], then
    ///   the closest resolution.
    ///
    /// The rows returned are those printed by `rrdtool fetch`: with R the archive's resolution,
    /// times from `start_s` rounded down to R, plus R, to `end_s` rounded down to R, plus R.
    /// Rows outside the archive's window are unknown (NaN).
    pub fn fetch(&self, cf: Cf, resolution_s: u64, start_s: u64, end_s: u64) -> Result<Fetched, Error> {
        if start_s > end_s {
            return Err(Error::BadRange { start_s, end_s });
        }
        if end_s > MAX_TIME_S {
            return Err(Error::TimeOutOfRange { t_s: end_s });
        }
        let (start, end, last) = (i128::from(start_s), i128::from(end_s), i128::from(self.last_update_s));
        let mut full: Option<(usize, i128)> = None;
        let mut part: Option<(usize, i128, i128)> = None;
        for (i, a) in self.spec.archives.iter().enumerate().filter(|(_, a)| a.cf == cf) {
            let row_s = i128::from(self.spec.resolution_s(i));
            let cal_end = last - last % row_s;
            let cal_start = cal_end - row_s * i128::from(a.rows);
            let diff = (i128::from(resolution_s) - row_s).abs();
            if cal_start <= start {
                if full.is_none_or(|(_, best)| diff < best) {
                    full = Some((i, diff));
                }
            } else {
                let matched = (end - start) - (cal_start - start);
                if part.is_none_or(|(_, best_match, best_diff)| {
                    best_match < matched || (best_match == matched && diff < best_diff)
                }) {
                    part = Some((i, matched, diff));
                }
            }
        }
        let archive = match (full, part) {
            (Some((i, _)), _) | (None, Some((i, _, _))) => i,
            (None, None) => return Err(Error::NoArchive(cf)),
        };
        let row_s = self.spec.resolution_s(archive);
        let first = start_s - start_s % row_s + row_s;
        let last_row = end_s - end_s % row_s + row_s;
        let count = (last_row - first) / row_s + 1;
        if count > MAX_FETCH_ROWS {
            return Err(Error::TooManyRows { rows: count });
        }
        let all = self.archive_rows(archive)?;
        let sources = self.spec.sources.len();
        let oldest = all.times_s[0];
        let mut rows = Vec::with_capacity(count as usize);
        for j in 0..count {
            let time_s = first + j * row_s;
            let index = (i128::from(time_s) - i128::from(oldest)) / i128::from(row_s);
            let values = if (0..all.times_s.len() as i128).contains(&index) {
                let at = index as usize * sources;
                all.values[at..at + sources].to_vec()
            } else {
                vec![f64::NAN; sources]
            };
            rows.push(Row { time_s, values });
        }
        Ok(Fetched { archive, resolution_s: row_s, rows })
    }

    /// Every row of archive `archive` in time order: the newest ends at the last update rounded
    /// down to the archive's resolution. Rows not written since creation are NaN.
    ///
    /// # Panics
    /// If `archive` is not an index into [`Spec::archives`].
    pub fn archive_rows(&self, archive: usize) -> Result<ArchiveRows, Error> {
        let a = self.spec.archives[archive];
        let sources = self.spec.sources.len();
        let rows = a.rows as usize;
        let mut raw = vec![0u8; rows * sources * 8];
        read_at(&self.file, &mut raw, self.layout.archive_offsets[archive])?;
        let row_s = self.spec.resolution_s(archive) as i64;
        let last = self.last_update_s as i64;
        let newest = last - last % row_s;
        let mut times_s = Vec::with_capacity(rows);
        let mut values = Vec::with_capacity(rows * sources);
        for i in 0..rows as i64 {
            let t = newest - (rows as i64 - 1 - i) * row_s;
            let slot = (t / row_s).rem_euclid(rows as i64) as usize;
            times_s.push(t);
            values.extend(
                raw[slot * sources * 8..(slot + 1) * sources * 8].chunks_exact(8).map(|b| format::f64_at(b, 0)),
            );
        }
        Ok(ArchiveRows { times_s, values })
    }

    /// The consolidation state of (archive, source), for the rrdtool export.
    pub(crate) fn cdp(&self, archive: usize, source: usize) -> CdpState {
        self.cdp[archive * self.spec.sources.len() + source]
    }

    fn apply(&mut self, t_s: u64, values: &[f64]) -> Result<(), Error> {
        let step = self.spec.step_s;
        let (k0, k) = (self.last_update_s / step, t_s / step);
        let gap = k - k0 - 1;
        let nan_row = vec![f64::NAN; values.len()];
        for a in 0..self.spec.archives.len() {
            if gap > 0 {
                self.skip(a, k0, gap, &nan_row)?;
            }
            self.add_point(a, k, values)?;
        }
        Ok(())
    }

    /// Adds `gap` unknown points after point `k0` to archive `a`, as many single unknown points
    /// would, but writing each affected row slot at most once.
    fn skip(&mut self, a: usize, k0: u64, gap: u64, nan_row: &[f64]) -> Result<(), Error> {
        let steps = u64::from(self.spec.archives[a].steps);
        let rows = u64::from(self.spec.archives[a].rows);
        let to_boundary = steps - k0 % steps;
        if gap < to_boundary {
            self.add_unknown(a, gap);
            return Ok(());
        }
        self.add_unknown(a, to_boundary - 1);
        self.add_point(a, k0 + to_boundary, nan_row)?;
        let rest = gap - to_boundary;
        let full_rows = rest / steps;
        // Rows older than the archive's length would be overwritten by later ones.
        for j in full_rows.saturating_sub(rows) + 1..=full_rows {
            self.add_unknown(a, steps - 1);
            self.add_point(a, k0 + to_boundary + j * steps, nan_row)?;
        }
        self.add_unknown(a, rest % steps);
        Ok(())
    }

    /// `n` unknown points that complete no row.
    fn add_unknown(&mut self, a: usize, n: u64) {
        if self.spec.archives[a].steps == 1 || n == 0 {
            return;
        }
        let sources = self.spec.sources.len();
        for state in &mut self.cdp[a * sources..(a + 1) * sources] {
            state.unknown_pdps += n;
        }
    }

    /// Point `k` (ending at k × step) of every source into archive `a`; writes the row it
    /// completes, if any.
    fn add_point(&mut self, a: usize, k: u64, values: &[f64]) -> Result<(), Error> {
        let spec = &self.spec.archives[a];
        let sources = self.spec.sources.len();
        let completes = k.is_multiple_of(u64::from(spec.steps));
        for (s, state) in self.cdp[a * sources..(a + 1) * sources].iter_mut().enumerate() {
            if let Some(v) = state.add(spec.cf, spec.steps, self.spec.xff, canonical(values[s]), completes) {
                self.row_buf[s * 8..s * 8 + 8].copy_from_slice(&canonical(v).to_le_bytes());
            }
        }
        if completes {
            let slot = (k / u64::from(spec.steps)) % u64::from(spec.rows);
            let at = self.layout.archive_offsets[a] + slot * sources as u64 * 8;
            write_at(&self.file, &self.row_buf, at)?;
        }
        Ok(())
    }

    fn write_live(&mut self) -> Result<(), Error> {
        let b = &mut self.live_buf;
        b.clear();
        b.extend_from_slice(&self.last_update_s.to_le_bytes());
        for v in &self.last_values {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for state in &self.cdp {
            b.extend_from_slice(&state.value.to_le_bytes());
            b.extend_from_slice(&state.unknown_pdps.to_le_bytes());
            b.extend_from_slice(&state.primary.to_le_bytes());
            b.extend_from_slice(&state.secondary.to_le_bytes());
        }
        debug_assert_eq!(b.len(), self.layout.live_len);
        write_at(&self.file, b, self.layout.live_offset)?;
        Ok(())
    }
}

/// One bit pattern for unknown, so equal inputs give equal files.
fn canonical(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        f64::NAN
    }
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn write_at(mut file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(buf)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}
