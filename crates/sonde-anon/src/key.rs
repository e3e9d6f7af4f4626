//! The 256-bit anonymisation key and its file.
//!
//! A key file holds either the 32 key bytes as they are (the reference implementation's form) or
//! 64 hexadecimal digits, optionally followed by one line ending (`\n` or `\r\n`). A new key is
//! written as hex and a newline, so it can be read, copied and compared with ordinary tools.
//!
//! Creation never leaves a partial key where a reader could see it: the key is written to a
//! temporary file in the same directory (created with mode 0600, fsynced), then hard-linked to
//! the final name, which fails if that name exists. Of two runs creating the same key at once,
//! one links and the other reads what the first linked, so both use the same key.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// A key file larger than this is not a key file (read no further).
const MAX_FILE_BYTES: u64 = 128;

/// 32 secret bytes. `Debug` does not print them.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; 32]);

impl Key {
    pub const LEN: usize = 32;

    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Key(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A fresh key from the operating system's random source.
    pub fn generate() -> Result<Self, KeyError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(Key(bytes))
    }

    /// Reads a key file's content: 32 raw bytes, or 64 hex digits with an optional line ending.
    pub fn parse(content: &[u8]) -> Result<Self, KeyFormatError> {
        if content.len() == Self::LEN {
            let mut bytes = [0u8; 32];
            bytes.copy_from_slice(content);
            return Ok(Key(bytes));
        }
        let hex = content.strip_suffix(b"\n").map(|c| c.strip_suffix(b"\r").unwrap_or(c)).unwrap_or(content);
        if hex.len() != 2 * Self::LEN {
            return Err(KeyFormatError::Length(content.len()));
        }
        let mut bytes = [0u8; 32];
        for (i, pair) in hex.chunks_exact(2).enumerate() {
            match (hex_digit(pair[0]), hex_digit(pair[1])) {
                (Some(hi), Some(lo)) => bytes[i] = hi << 4 | lo,
                _ => return Err(KeyFormatError::NotHex { offset: 2 * i + usize::from(hex_digit(pair[0]).is_some()) }),
            }
        }
        Ok(Key(bytes))
    }

    /// The key as 64 lowercase hex digits (the form written to a new key file, less the newline).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads the key at `path`, or creates a new random one there (mode 0600) if nothing exists.
    pub fn load_or_create(path: &Path) -> Result<LoadedKey, KeyError> {
        match Self::load(path) {
            Err(KeyError::Io { ref source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        let key = Self::generate()?;
        match write_new(path, &key) {
            Ok(()) => Ok(LoadedKey { key, created: true, loose_mode: None }),
            // Another run created it between our read and our link: use its key.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Self::load(path),
            Err(source) => Err(KeyError::Io { path: path.to_path_buf(), action: "create", source }),
        }
    }

    /// Reads the key at `path`; does not create it.
    pub fn load(path: &Path) -> Result<LoadedKey, KeyError> {
        let io_err = |action, source| KeyError::Io { path: path.to_path_buf(), action, source };
        let file = File::open(path).map_err(|e| io_err("open", e))?;
        let meta = file.metadata().map_err(|e| io_err("stat", e))?;
        let mut content = Vec::with_capacity(2 * Self::LEN + 2);
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut content).map_err(|e| io_err("read", e))?;
        let key = Self::parse(&content).map_err(|error| KeyError::Format { path: path.to_path_buf(), error })?;
        Ok(LoadedKey { key, created: false, loose_mode: loose_mode(&meta) })
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

/// What [`Key::load_or_create`] found.
#[derive(Debug, Clone)]
pub struct LoadedKey {
    pub key: Key,
    /// The file did not exist and was created with a new random key.
    pub created: bool,
    /// The file's permission bits when group or others may access it (e.g. `0o644`): the caller
    /// should warn. The key is used all the same.
    pub loose_mode: Option<u32>,
}

#[cfg(unix)]
fn loose_mode(meta: &fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o7777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(not(unix))]
fn loose_mode(_meta: &fs::Metadata) -> Option<u32> {
    None
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Writes `key` to a new file at `path`; `AlreadyExists` if something is there.
fn write_new(path: &Path, key: &Key) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = dir.join(tmp_name);

    let written =
        write_private(&tmp, format!("{}\n", key.to_hex()).as_bytes()).and_then(|()| fs::hard_link(&tmp, path));
    // The temporary name goes in every case; the key lives on under `path` if the link was made.
    let _ = fs::remove_file(&tmp);
    written?;
    // The new directory entry must survive a crash as well as the content.
    File::open(dir)?.sync_all()
}

fn write_private(path: &Path, content: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Set at open, so the key is never readable by others, not even briefly.
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(content)?;
    file.sync_all()
}

/// Why a key file's content is not a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFormatError {
    /// Neither 32 bytes nor 64 hex digits (plus an optional line ending); the length found.
    Length(usize),
    /// 64 characters, but the one at this offset is not a hex digit.
    NotHex { offset: usize },
}

impl fmt::Display for KeyFormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFormatError::Length(len) => write!(
                f,
                "{len} bytes; a key file holds 32 raw bytes or 64 hex digits (optionally followed by a newline)"
            ),
            KeyFormatError::NotHex { offset } => write!(f, "byte {offset} is not a hex digit"),
        }
    }
}

impl std::error::Error for KeyFormatError {}

/// Loading or creating a key failed.
#[derive(Debug)]
pub enum KeyError {
    /// `action` ("open", "read", "create", …) on `path` failed.
    Io { path: PathBuf, action: &'static str, source: io::Error },
    /// The file at `path` does not hold a key.
    Format { path: PathBuf, error: KeyFormatError },
    /// The operating system's random source failed.
    Random(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Io { path, action, source } => write!(f, "key file {}: {action}: {source}", path.display()),
            KeyError::Format { path, error } => write!(f, "key file {}: not a key: {error}", path.display()),
            KeyError::Random(e) => write!(f, "cannot generate a key: random source failed: {e}"),
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyError::Io { source, .. } => Some(source),
            KeyError::Format { error, .. } => Some(error),
            KeyError::Random(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_raw_and_hex() {
        let raw: [u8; 32] = std::array::from_fn(|i| i as u8 * 7);
        let key = Key::parse(&raw).unwrap();
        assert_eq!(key.as_bytes(), &raw);
        let hex = key.to_hex();
        assert_eq!(Key::parse(hex.as_bytes()).unwrap(), key);
        assert_eq!(Key::parse(format!("{hex}\n").as_bytes()).unwrap(), key);
        assert_eq!(Key::parse(format!("{hex}\r\n").as_bytes()).unwrap(), key);
        assert_eq!(Key::parse(hex.to_uppercase().as_bytes()).unwrap(), key);
    }

    #[test]
    fn parse_rejects() {
        assert_eq!(Key::parse(b""), Err(KeyFormatError::Length(0)));
        assert_eq!(Key::parse(&[0u8; 31]), Err(KeyFormatError::Length(31)));
        let mut hex = [b'a'; 64];
        hex[9] = b'g';
        assert_eq!(Key::parse(&hex), Err(KeyFormatError::NotHex { offset: 9 }));
        hex[9] = b'a';
        hex[40] = b' ';
        assert_eq!(Key::parse(&hex), Err(KeyFormatError::NotHex { offset: 40 }));
        let two_newlines = format!("{}\n\n", "ab".repeat(32));
        assert_eq!(Key::parse(two_newlines.as_bytes()), Err(KeyFormatError::Length(66)));
    }

    #[test]
    fn debug_hides_the_key() {
        assert_eq!(format!("{:?}", Key::from_bytes([1; 32])), "Key(..)");
    }
}
