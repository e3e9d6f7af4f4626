//! `manifest.tsv`: one line per complete file of a location, rewritten whole (temp file + rename).

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use sonde_output::read::{ReadError, ReadErrorKind, TsvReader};
use sonde_output::PendingFile;

pub const MANIFEST_NAME: &str = "manifest.tsv";
/// The manifest is written under this name, then renamed over [`MANIFEST_NAME`].
pub const MANIFEST_TMP_NAME: &str = "manifest.tsv.tmp";
pub const HEADER: &str = "chunk\tfile\tbytes\tfirst_ts\tend_ts\tcompleted_unix_s";
/// [`HEADER`]'s columns.
const COLUMNS: [&str; 6] = ["chunk", "file", "bytes", "first_ts", "end_ts", "completed_unix_s"];
/// Suffix of a file still being written.
pub const PART_SUFFIX: &str = ".part";

/// One complete file, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub chunk: String,
    pub file: String,
    pub bytes: u64,
    pub first_ns: u64,
    pub end_ns: u64,
    pub completed_unix_s: u64,
}

// Seconds with 9 decimals: exact for nanoseconds, read back without floating point.
use sonde_types::time::parse_seconds_9;
pub use sonde_types::time::seconds_9;

fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Why a chunk or file name cannot be used: it must be one plain path component that fits in a
/// TSV field and cannot be mistaken for the spool's own files.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("empty")
    } else if name == "." || name == ".." {
        Some("'.' and '..' are not names")
    } else if name.contains('/') || name.contains('\0') {
        Some("holds '/' or NUL: one path component only")
    } else if name.contains(['\t', '\n', '\r']) {
        Some("holds a tab or line break (the manifest is TSV)")
    } else if name.ends_with(PART_SUFFIX) {
        Some("ends in .part, the suffix of files being written")
    } else if name == MANIFEST_NAME || name == MANIFEST_TMP_NAME {
        Some("is the manifest's name")
    } else {
        None
    }
}

/// Reads a manifest; a line that is not exactly what [`write`] writes (blank lines aside) is an error with its
/// number (1-based) and what was wrong: the spool does not guess at a damaged manifest.
pub fn read(text: &str) -> Result<Vec<Entry>, (usize, String)> {
    let problem = |e: ReadError| {
        let reason = match e.kind {
            ReadErrorKind::FieldCount { fields, columns } => format!("{fields} fields, expected {columns}"),
            kind => kind.to_string(),
        };
        (e.line.unwrap_or(1), reason)
    };
    let mut tsv = match TsvReader::new(Path::new(MANIFEST_NAME), text.as_bytes()) {
        Err(ReadError { kind: ReadErrorKind::NoHeader, .. }) => return Ok(Vec::new()),
        other => other.map_err(problem)?,
    };
    if !tsv.columns().iter().map(String::as_str).eq(COLUMNS) {
        return Err((1, format!("expected the header '{}'", HEADER.replace('\t', "\\t"))));
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut listed: HashSet<(String, String)> = HashSet::new();
    while let Some(row) = tsv.next_row().map_err(problem)? {
        let number = row.line;
        let fields: Vec<&str> = row.fields().collect();
        // The header has the six columns: the reader refused any other count.
        let [chunk, file, bytes, first, end, completed] = fields[..] else {
            return Err((number, format!("{} fields, expected 6", fields.len())));
        };
        for name in [chunk, file] {
            if let Some(problem) = name_problem(name) {
                return Err((number, format!("name '{name}' {problem}")));
            }
        }
        let number_field = |value: Option<u64>, what: &str| value.ok_or((number, format!("bad {what}")));
        let entry = Entry {
            chunk: chunk.to_string(),
            file: file.to_string(),
            bytes: number_field(parse_u64(bytes), "bytes")?,
            first_ns: number_field(parse_seconds_9(first), "first_ts (seconds with 9 decimals)")?,
            end_ns: number_field(parse_seconds_9(end), "end_ts (seconds with 9 decimals)")?,
            completed_unix_s: number_field(parse_u64(completed), "completed_unix_s")?,
        };
        if !listed.insert((entry.chunk.clone(), entry.file.clone())) {
            return Err((number, format!("{}/{} listed twice", entry.chunk, entry.file)));
        }
        entries.push(entry);
    }
    Ok(entries)
}

pub fn render(entries: &[Entry]) -> String {
    let mut text = String::with_capacity(64 * (entries.len() + 1));
    text.push_str(HEADER);
    text.push('\n');
    for e in entries {
        let line = [
            e.chunk.as_str(),
            &e.file,
            &e.bytes.to_string(),
            &seconds_9(e.first_ns),
            &seconds_9(e.end_ns),
            &e.completed_unix_s.to_string(),
        ]
        .join("\t");
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Replaces `dir`'s manifest atomically: readers see the old one or the new one, whole. An
/// error means the old one is still in place.
pub fn write(dir: &Path, entries: &[Entry]) -> io::Result<()> {
    let tmp = dir.join(MANIFEST_TMP_NAME);
    // A temporary file an earlier failure could not remove is never complete.
    let _ = fs::remove_file(&tmp);
    let mut pending = PendingFile::with_temp(&dir.join(MANIFEST_NAME), &tmp)?;
    pending.write_all(render(entries).as_bytes())?;
    pending.commit(true)?;
    // The new manifest is in place and lists whole files: a failed sync leaves only the
    // rename's durability in doubt, and taking the chunk back now would list files gone.
    let _ = sync_dir(dir);
    Ok(())
}

/// Makes renames and creations in `dir` durable.
pub use sonde_output::pending::sync_dir;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(chunk: &str, file: &str, bytes: u64) -> Entry {
        Entry {
            chunk: chunk.into(),
            file: file.into(),
            bytes,
            first_ns: 1_700_000_000_000_000_001,
            end_ns: 1_700_000_300_123_456_789,
            completed_unix_s: 1_764_000_000,
        }
    }

    #[test]
    fn round_trip() {
        let entries = vec![entry("c1", "intervals.tsv", 10), entry("c1", "tcp_flows.tsv", 0), entry("c2", "a", 1)];
        let text = render(&entries);
        assert!(text.starts_with(&format!("{HEADER}\n")));
        assert_eq!(HEADER, COLUMNS.join("\t"));
        assert!(text.contains("c1\tintervals.tsv\t10\t1700000000.000000001\t1700000300.123456789\t1764000000\n"));
        assert_eq!(read(&text), Ok(entries));
        assert_eq!(read(""), Ok(vec![]));
        assert_eq!(read(&render(&[])), Ok(vec![]));
    }

    #[test]
    fn damaged_lines_are_errors_with_their_number() {
        let good = render(&[entry("c1", "a", 1)]);
        let line_2 = |line: &str| read(&format!("{HEADER}\n{line}\n")).unwrap_err().0;
        assert_eq!(read("chunk\tfile\n").unwrap_err().0, 1);
        assert_eq!(line_2("c1\ta\t1\t0.000000000\t0.000000000"), 2);
        assert_eq!(line_2("c1\ta\tx\t0.000000000\t0.000000000\t0"), 2);
        assert_eq!(line_2("c1\ta\t1\t0.5\t0.000000000\t0"), 2);
        assert_eq!(line_2("c1\ta\t1\t0.000000000\t-1.000000000\t0"), 2);
        assert_eq!(line_2("..\ta\t1\t0.000000000\t0.000000000\t0"), 2);
        assert_eq!(line_2("c1\ta.part\t1\t0.000000000\t0.000000000\t0"), 2);
        assert_eq!(line_2("c1\ta\t1\t99999999999.000000000\t0.000000000\t0"), 2);
        let twice = format!("{good}c1\ta\t2\t0.000000000\t0.000000000\t0\n");
        assert_eq!(read(&twice).unwrap_err().0, 3);
    }

    #[test]
    fn names() {
        for good in ["20261125-0600", "tcp_flows.tsv", ".hidden", "a b"] {
            assert_eq!(name_problem(good), None, "{good}");
        }
        for bad in ["", ".", "..", "a/b", "a\tb", "a\nb", "x.part", "manifest.tsv", "manifest.tsv.tmp"] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
    }
}
