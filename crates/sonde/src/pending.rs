//! An output file that appears whole or not at all (`sonde anon`, `sonde thin`): written under
//! a temporary name beside it and moved into place once complete.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The output, written under a temporary name in the same directory and renamed into place
/// once complete: a failed run leaves no half-written trace (the temporary file is removed).
pub struct PendingFile {
    pub file: File,
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl PendingFile {
    pub fn create(dest: &Path, force: bool) -> Result<PendingFile> {
        if !force && dest.symlink_metadata().is_ok() {
            bail!("{} exists (use --force to overwrite it)", dest.display());
        }
        let name = dest.file_name().with_context(|| format!("{}: not a file name", dest.display()))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".sonde-{}.tmp", std::process::id()));
        let tmp = dest.with_file_name(tmp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        Ok(PendingFile { file, tmp, dest: dest.to_path_buf(), committed: false })
    }

    /// Moves the complete file into place; without `force`, never over a file that appeared
    /// meanwhile (a hard link fails if the name exists).
    pub fn commit(mut self, force: bool) -> Result<()> {
        self.file.sync_all().with_context(|| format!("writing {}", self.tmp.display()))?;
        if force {
            std::fs::rename(&self.tmp, &self.dest)
        } else {
            std::fs::hard_link(&self.tmp, &self.dest).and_then(|()| std::fs::remove_file(&self.tmp))
        }
        .with_context(|| format!("moving the output into place as {}", self.dest.display()))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
