//! The one way sonde writes a file that must appear whole or not at all: under a temporary name
//! in the same directory, synced, then renamed into place. A failed or abandoned write removes
//! the temporary file, so no reader ever sees a partial output under its real name.
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
    /// Starts `dest` under the temporary name `.NAME.sonde-PID.tmp`. Without `overwrite`, an
    /// existing `dest` is refused at once (`AlreadyExists`), before anything is written.
    pub fn create(dest: &Path, overwrite: bool) -> io::Result<PendingFile> {
        if !overwrite && dest.symlink_metadata().is_ok() {
            let message = format!("{} exists (use --force to overwrite it)", dest.display());
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, message));
        }
        let Some(name) = dest.file_name() else {
            let message = format!("{}: not a file name", dest.display());
            return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".sonde-{}.tmp", std::process::id()));
        let tmp = dest.with_file_name(tmp_name);
        PendingFile::with_temp(dest, &tmp)
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

    /// Syncs the file and moves it into place. With `overwrite`, replaces whatever `dest` is
    /// (a rename); without, never a file that appeared meanwhile (a hard link fails if the name
    /// exists). On error the temporary file is removed and `dest` is as before.
    pub fn commit(mut self, overwrite: bool) -> io::Result<()> {
        self.file.sync_all().map_err(|e| context("writing", &self.tmp, e))?;
        if overwrite {
            fs::rename(&self.tmp, &self.dest)
        } else {
            fs::hard_link(&self.tmp, &self.dest).and_then(|()| fs::remove_file(&self.tmp))
        }
        .map_err(|e| context("moving into place", &self.dest, e))?;
        self.committed = true;
        Ok(())
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
