//! The one way sonde writes a file that must appear whole or not at all: under a temporary name
//! in the same directory (`NAME.part`), synced, then renamed into place and the directory
//! synced. A failed or abandoned write removes the temporary file, so no reader ever sees a
//! partial output under its real name; a process killed outright (SIGKILL, a power cut) leaves
//! at most a `NAME.part`, which says it is incomplete.
//!
//! Links are never written through: the temporary file is created with `O_CREAT|O_EXCL`
//! (which refuses any existing name, a symbolic link included, dangling or not), and the
//! rename replaces whatever the destination is (a link is replaced, its target untouched).
//!
//! Used by the output directory (every file of a run), the spool (a chunk's `name.part` files
//! and its `manifest.tsv.tmp`) and the trace writers of `sonde anon` and `sonde thin`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file being written under a temporary name beside its destination; [`PendingFile::commit`]
/// moves it into place, and dropping it uncommitted removes it. Errors name the file they
/// concern.
#[derive(Debug)]
pub struct PendingFile {
    /// The temporary file (write through it, or through the `Write` impl).
    pub file: File,
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl PendingFile {
    /// Starts `dest` under the temporary name `NAME.part` beside it. Without `overwrite`, an
    /// existing `dest` is refused at once (`AlreadyExists`), before anything is written. An
    /// existing `NAME.part` (another writer's, or left by a process that was killed) is
    /// refused too, never reused.
    pub fn create(dest: &Path, overwrite: bool) -> io::Result<PendingFile> {
        if !overwrite && dest.symlink_metadata().is_ok() {
            let message = format!("{} exists (use --force to overwrite it)", dest.display());
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, message));
        }
        let Some(name) = dest.file_name() else {
            let message = format!("{}: not a file name", dest.display());
            return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        };
        let tmp = dest.with_file_name(part_name(name));
        PendingFile::with_temp(dest, &tmp).map_err(|e| {
            if e.kind() != io::ErrorKind::AlreadyExists {
                return e;
            }
            let message = format!(
                "{} exists: another run is writing {}, or one was killed while writing it (remove it)",
                tmp.display(),
                dest.display()
            );
            io::Error::new(io::ErrorKind::AlreadyExists, message)
        })
    }

    /// Starts `dest` under the temporary path `tmp` (in the same directory, so the rename is
    /// atomic); `tmp` must not exist.
    pub fn with_temp(dest: &Path, tmp: &Path) -> io::Result<PendingFile> {
        let file =
            OpenOptions::new().write(true).create_new(true).open(tmp).map_err(|e| context("creating", tmp, e))?;
        Ok(PendingFile { file, tmp: tmp.to_path_buf(), dest: dest.to_path_buf(), committed: false })
    }

    /// Where the file is being written until it is committed.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs the file and moves it into place, then syncs the directory. With `overwrite`,
    /// replaces whatever `dest` is (a rename: a symbolic link there is replaced, not followed);
    /// without, never a name that appeared meanwhile (a hard link fails if the name exists).
    /// On error the temporary file is removed and `dest` is as before.
    pub fn commit(mut self, overwrite: bool) -> io::Result<()> {
        self.file.sync_all().map_err(|e| context("writing", &self.tmp, e))?;
        if overwrite {
            fs::rename(&self.tmp, &self.dest)
        } else {
            fs::hard_link(&self.tmp, &self.dest).and_then(|()| fs::remove_file(&self.tmp))
        }
        .map_err(|e| context("moving into place", &self.dest, e))?;
        self.committed = true;
        let dir = self.dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        sync_dir(dir).map_err(|e| context("syncing the directory of", &self.dest, e))
    }
}

impl Write for PendingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `dest` whole or not at all (replacing an earlier `dest`): `body` writes through a
/// 64 KiB buffer into a [`PendingFile`], committed once `body` succeeds.
pub fn write_atomic(dest: &Path, body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, PendingFile::create(dest, true)?);
    body(&mut w).and_then(|()| w.flush()).map_err(|e| context("writing", dest, e))?;
    let pending = w.into_inner().map_err(|e| context("writing", dest, e.into_error()))?;
    pending.commit(true)
}

/// `NAME.part`: where [`PendingFile::create`] writes `NAME` until it is whole.
pub fn part_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut part = name.to_os_string();
    part.push(PART_SUFFIX);
    part
}

/// The suffix of a file still being written (or left incomplete by a killed process).
pub const PART_SUFFIX: &str = ".part";

/// Makes renames and creations in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `e`, its kind kept, saying what was done to which file.
fn context(action: &str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{action} {}: {e}", path.display()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sonde-pending-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The files in `dir`, sorted: what a write left there (no temporary file).
    pub(crate) fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_committed_file_appears_whole_and_alone() {
        let dir = scratch("commit");
        let dest = dir.join("out.tsv");
        write_atomic(&dest, |w| w.write_all(b"a\tb\n")).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"a\tb\n");
        assert_eq!(names(&dir), ["out.tsv"]);
        // Replaced whole by a second write.
        write_atomic(&dest, |w| w.write_all(b"c\n")).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"c\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_nothing() {
        let dir = scratch("fail");
        let dest = dir.join("out.tsv");
        let err = write_atomic(&dest, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk on fire"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("disk on fire") && err.to_string().contains("out.tsv"), "{err}");
        assert!(names(&dir).is_empty(), "{:?}", names(&dir));
        // An earlier complete file survives a failed rewrite.
        write_atomic(&dest, |w| w.write_all(b"old")).unwrap();
        let _ = write_atomic(&dest, |_| Err(io::Error::other("no")));
        assert_eq!(fs::read(&dest).unwrap(), b"old");
        assert_eq!(names(&dir), ["out.tsv"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_overwrite_an_existing_file_is_kept() {
        let dir = scratch("keep");
        let dest = dir.join("trace.pcap");
        fs::write(&dest, b"mine").unwrap();
        let err = PendingFile::create(&dest, false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(err.to_string().contains("--force"), "{err}");
        // A file that appears between create and commit is not replaced either.
        fs::remove_file(&dest).unwrap();
        let mut pending = PendingFile::create(&dest, false).unwrap();
        pending.write_all(b"new").unwrap();
        fs::write(&dest, b"theirs").unwrap();
        assert!(pending.commit(false).is_err());
        assert_eq!(fs::read(&dest).unwrap(), b"theirs");
        assert_eq!(names(&dir), ["trace.pcap"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 20: a symbolic link where the output goes is replaced, never written through,
    /// dangling or not; its target keeps its bytes (or stays absent).
    #[test]
    fn links_at_the_destination_are_replaced_not_followed() {
        let dir = scratch("links");
        let target = dir.join("precious");
        fs::write(&target, b"keep me").unwrap();
        let dest = dir.join("tcp_flows.tsv");
        std::os::unix::fs::symlink(&target, &dest).unwrap();
        write_atomic(&dest, |w| w.write_all(b"flows\n")).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"keep me");
        assert!(!dest.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&dest).unwrap(), b"flows\n");
        // A dangling link: its target is not created.
        let dangling = dir.join("udp_flows.tsv");
        let nowhere = dir.join("created-through-a-link");
        std::os::unix::fs::symlink(&nowhere, &dangling).unwrap();
        write_atomic(&dangling, |w| w.write_all(b"udp\n")).unwrap();
        assert!(nowhere.symlink_metadata().is_err(), "the link's target was created");
        assert_eq!(fs::read(&dangling).unwrap(), b"udp\n");
        // A link at the temporary name is refused, not followed.
        let summary = dir.join("summary.json");
        std::os::unix::fs::symlink(&nowhere, dir.join("summary.json.part")).unwrap();
        let err = write_atomic(&summary, |w| w.write_all(b"{}")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
        assert!(err.to_string().contains("summary.json.part"), "{err}");
        assert!(nowhere.symlink_metadata().is_err() && summary.symlink_metadata().is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// While being written the file is `NAME.part`, which says it is incomplete.
    #[test]
    fn the_temporary_name_is_dot_part() {
        let dir = scratch("part");
        let dest = dir.join("summary.json");
        let mut pending = PendingFile::create(&dest, true).unwrap();
        pending.write_all(b"{").unwrap();
        assert_eq!(pending.temp_path(), dir.join("summary.json.part"));
        assert_eq!(names(&dir), ["summary.json.part"]);
        pending.commit(true).unwrap();
        assert_eq!(names(&dir), ["summary.json"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_abandoned_file_is_removed() {
        let dir = scratch("drop");
        let dest = dir.join("x");
        let tmp = dir.join("x.part");
        let mut pending = PendingFile::with_temp(&dest, &tmp).unwrap();
        pending.write_all(b"abc").unwrap();
        assert_eq!(pending.temp_path(), tmp);
        assert!(PendingFile::with_temp(&dest, &tmp).is_err(), "the temporary name is taken");
        drop(pending);
        assert!(names(&dir).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }
}
