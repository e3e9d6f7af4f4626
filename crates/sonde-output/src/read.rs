//! Reading back what an output directory holds: tab-separated files with a header row, and
//! JSON lines. One reader for every crate that reads sonde's files (figures, comparison, the
//! HTTP view, the spool's manifest), so they agree on what a well-formed file is.
//!
//! A TSV file here is what the writers make: a header row of column names, then rows with
//! exactly as many fields, separated by tabs. There is no quoting (a field holds no tab or line
//! break), `\n` or `\r\n` ends a line, empty lines are skipped and the last line may lack its
//! line ending. Anything else is an error naming the file and the line (1-based, the header
//! being line 1). `-` is the files' "no value"; the reader hands it over as text and callers
//! decide what it means.
//!
//! ```
//! use std::path::Path;
//! use sonde_output::read::Table;
//! let t = Table::from_reader(Path::new("x.tsv"), "a\tb\n1\t-\n".as_bytes()).unwrap();
//! assert_eq!(t.column("b"), Some(1));
//! assert_eq!(t.row(0).unwrap().collect::<Vec<_>>(), ["1", "-"]);
//! let e = Table::from_reader(Path::new("x.tsv"), "a\tb\n1\n".as_bytes()).unwrap_err();
//! assert_eq!(e.to_string(), "x.tsv:2: 1 fields, but the header has 2 columns");
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

/// The file name of the trace an output directory was made from (summary.json's `input`), or
/// `None` when the directory holds no readable summary: what a figure's title names, rather
/// than where the directory happens to be.
pub fn input_name(dir: &Path) -> Option<String> {
    let summary: Value = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).ok()?).ok()?;
    let input = Path::new(summary.get("input")?.as_str()?);
    Some(input.file_name().map_or_else(|| input.display().to_string(), |n| n.to_string_lossy().into_owned()))
}

/// Why a file could not be read: which file, which line when one is to blame, and what.
#[derive(Debug)]
pub struct ReadError {
    pub path: PathBuf,
    /// 1-based; the header is line 1. `None` when no line is to blame (the file cannot be
    /// opened).
    pub line: Option<usize>,
    pub kind: ReadErrorKind,
}

#[derive(Debug)]
#[non_exhaustive]
pub enum ReadErrorKind {
    Io(io::Error),
    /// The file is empty: a TSV file starts with its header row.
    NoHeader,
    /// A row does not have as many fields as the header has columns.
    FieldCount {
        fields: usize,
        columns: usize,
    },
    NotUtf8(String),
    /// A JSONL line is not a JSON object.
    NotJsonObject(String),
    /// Any other refusal of the csv parser (none is expected with this configuration).
    Other(String),
}

impl fmt::Display for ReadErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadErrorKind::Io(e) => write!(f, "{e}"),
            ReadErrorKind::NoHeader => f.write_str("empty file: no header line"),
            ReadErrorKind::FieldCount { fields, columns } => {
                write!(f, "{fields} fields, but the header has {columns} columns")
            }
            ReadErrorKind::NotUtf8(e) => write!(f, "not UTF-8 text ({e})"),
            ReadErrorKind::NotJsonObject(e) | ReadErrorKind::Other(e) => f.write_str(e),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.kind),
            None => write!(f, "{}: {}", self.path.display(), self.kind),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ReadErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl ReadError {
    #[cold]
    fn new(path: &Path, line: Option<usize>, kind: ReadErrorKind) -> ReadError {
        ReadError { path: path.to_path_buf(), line, kind }
    }

    /// `line` is the line of the record the parser refused.
    #[cold]
    fn from_csv(path: &Path, e: csv::Error, line: usize) -> ReadError {
        match e.into_kind() {
            csv::ErrorKind::Io(e) => ReadError::new(path, None, ReadErrorKind::Io(e)),
            csv::ErrorKind::UnequalLengths { expected_len, len, .. } => ReadError::new(
                path,
                Some(line),
                ReadErrorKind::FieldCount { fields: len as usize, columns: expected_len as usize },
            ),
            csv::ErrorKind::Utf8 { err, .. } => {
                ReadError::new(path, Some(line), ReadErrorKind::NotUtf8(err.to_string()))
            }
            // Seeking and serde are not used here.
            other => ReadError::new(path, None, ReadErrorKind::Other(format!("{other:?}"))),
        }
    }
}

/// The input as the csv parser reads it, with the offsets of its line breaks noted on the way:
/// the parser's own line count leaves out the blank lines it skips, and an error must name the
/// line an editor shows. Only the breaks the parser has read past and not yet asked about are
/// kept (at most a buffer's worth).
struct LineBreaks<R> {
    inner: R,
    read_bytes: u64,
    pending: VecDeque<u64>,
    /// Breaks already known to lie before the last offset asked about.
    passed: usize,
}

impl<R: Read> Read for LineBreaks<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let start = self.read_bytes;
        self.pending.extend(buf[..n].iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| start + i as u64));
        self.read_bytes += n as u64;
        Ok(n)
    }
}

impl<R> LineBreaks<R> {
    /// The 1-based line holding byte `offset`; offsets are asked about in increasing order.
    fn line_at(&mut self, offset: u64) -> usize {
        while self.pending.front().is_some_and(|&b| b < offset) {
            self.pending.pop_front();
            self.passed += 1;
        }
        self.passed + 1
    }
}

/// A TSV file open for reading, its header already read: rows come one at a time, so a flow
/// log of any length is read in constant memory.
pub struct TsvReader<R> {
    path: PathBuf,
    csv: csv::Reader<LineBreaks<R>>,
    columns: Vec<String>,
    record: csv::StringRecord,
}

impl TsvReader<File> {
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let file = File::open(path).map_err(|e| ReadError::new(path, None, ReadErrorKind::Io(e)))?;
        TsvReader::new(path, file)
    }
}

impl<R: Read> TsvReader<R> {
    /// Reads the header row of `reader` (which is buffered here); `path` names the input in
    /// errors.
    pub fn new(path: &Path, reader: R) -> Result<Self, ReadError> {
        let mut csv = csv::ReaderBuilder::new()
            .delimiter(b'\t')
            .quoting(false)
            .has_headers(true)
            .flexible(false)
            .from_reader(LineBreaks { inner: reader, read_bytes: 0, pending: VecDeque::new(), passed: 0 });
        let header = csv.headers().map_err(|e| ReadError::from_csv(path, e, 1))?;
        if header.is_empty() {
            return Err(ReadError::new(path, Some(1), ReadErrorKind::NoHeader));
        }
        let columns = header.iter().map(str::to_string).collect();
        Ok(TsvReader { path: path.to_path_buf(), csv, columns, record: csv::StringRecord::new() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header's column names, in file order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// The next row, or `None` at the end of the file. After an error the reader goes on with
    /// the line after the bad one.
    pub fn next_row(&mut self) -> Result<Option<Row<'_>>, ReadError> {
        let read = self.csv.read_record(&mut self.record);
        // The parser's positions count neither the blank lines it skipped nor, at a record's
        // start, where they end; its position after the record is exact. A record is one line
        // (no quoting), so the line of its last byte is its line.
        let end = self.csv.position().byte();
        let line = self.csv.get_mut().line_at(end.saturating_sub(1));
        match read {
            Ok(true) => Ok(Some(Row { line, record: &self.record })),
            Ok(false) => Ok(None),
            Err(e) => Err(ReadError::from_csv(&self.path, e, line)),
        }
    }
}

/// One row, as many fields as the header has columns.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// 1-based line number (the header is line 1).
    pub line: usize,
    record: &'a csv::StringRecord,
}

impl<'a> Row<'a> {
    /// Field `column`, or `None` past the last column.
    pub fn get(&self, column: usize) -> Option<&'a str> {
        self.record.get(column)
    }

    pub fn len(&self) -> usize {
        self.record.len()
    }

    pub fn is_empty(&self) -> bool {
        self.record.is_empty()
    }

    pub fn fields(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.record.iter()
    }
}

/// A whole TSV file in memory. Each row is kept as one string (its fields joined by tabs, as
/// the file has them): a flow log held as one allocation per row takes a fraction of the
/// memory of one per field. Rows are shared, not copied, by the tables made from a table
/// ([`Table::filtered`]) or from rows kept elsewhere ([`Table::from_rows`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub columns: Vec<String>,
    rows: Vec<Arc<str>>,
}

impl Table {
    /// A table of `rows` (each its fields joined by tabs, no line end), shared with their
    /// holder; a row without one field per column is left out, as [`Table::from_tsv_lenient`]
    /// leaves it.
    pub fn from_rows<'r>(columns: Vec<String>, rows: impl IntoIterator<Item = &'r Arc<str>>) -> Table {
        let tabs = columns.len().saturating_sub(1);
        let rows = rows.into_iter().filter(|r| r.bytes().filter(|&b| b == b'\t').count() == tabs).cloned().collect();
        Table { columns, rows }
    }

    pub fn from_path(path: &Path) -> Result<Table, ReadError> {
        Table::from_tsv(TsvReader::open(path)?)
    }

    /// Reads `reader`; `path` names it in errors.
    pub fn from_reader(path: &Path, reader: impl Read) -> Result<Table, ReadError> {
        Table::from_tsv(TsvReader::new(path, reader)?)
    }

    /// The rest of `tsv`'s rows.
    pub fn from_tsv<R: Read>(mut tsv: TsvReader<R>) -> Result<Table, ReadError> {
        let mut rows = Vec::new();
        let mut line = String::new();
        while let Some(row) = tsv.next_row()? {
            join_fields(&row, &mut line);
            rows.push(Arc::from(line.as_str()));
        }
        Ok(Table { columns: tsv.columns, rows })
    }

    /// The rows `tsv` has that read well, the bad ones (a wrong number of fields, not UTF-8)
    /// left out: for text a caller made itself and would rather show in part than not at all.
    /// Only an I/O error stops the reading.
    pub fn from_tsv_lenient<R: Read>(mut tsv: TsvReader<R>) -> Table {
        let mut rows = Vec::new();
        let mut line = String::new();
        loop {
            match tsv.next_row() {
                Ok(Some(row)) => {
                    join_fields(&row, &mut line);
                    rows.push(Arc::from(line.as_str()));
                }
                Ok(None) => break,
                Err(ReadError { kind: ReadErrorKind::Io(_), .. }) => break,
                Err(_) => continue,
            }
        }
        Table { columns: tsv.columns, rows }
    }

    /// The columns, and each row as its fields joined by tabs.
    /// The same columns with the rows `keep` says (by index).
    pub fn filtered(&self, mut keep: impl FnMut(usize) -> bool) -> Table {
        let rows = self.rows.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, r)| r.clone()).collect();
        Table { columns: self.columns.clone(), rows }
    }

    /// The index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The fields of row `row` (0-based among the data rows).
    pub fn row(&self, row: usize) -> Option<impl Iterator<Item = &str>> {
        self.rows.get(row).map(|r| r.split('\t'))
    }

    /// Every row's fields, in file order.
    pub fn rows(&self) -> impl Iterator<Item = impl Iterator<Item = &str>> {
        self.rows.iter().map(|r| r.split('\t'))
    }

    /// Field `column` of row `row`.
    pub fn cell(&self, row: usize, column: usize) -> Option<&str> {
        self.rows.get(row)?.split('\t').nth(column)
    }
}

/// The row's fields joined by tabs into `out` (which it clears). Exact: no field holds a tab.
fn join_fields(row: &Row<'_>, out: &mut String) {
    out.clear();
    for (i, field) in row.fields().enumerate() {
        if i > 0 {
            out.push('\t');
        }
        out.push_str(field);
    }
}

/// The objects of a JSON lines file (`--format jsonl` flow logs), one per non-blank line, each
/// with its 1-based line number. A line that is not a JSON object is an error naming it; the
/// iterator goes on with the next line.
pub struct JsonLines<R> {
    path: PathBuf,
    lines: io::Lines<R>,
    line: usize,
}

impl JsonLines<BufReader<File>> {
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let file = File::open(path).map_err(|e| ReadError::new(path, None, ReadErrorKind::Io(e)))?;
        Ok(JsonLines::new(path, BufReader::new(file)))
    }
}

impl<R: BufRead> JsonLines<R> {
    /// `path` names the input in errors.
    pub fn new(path: &Path, reader: R) -> Self {
        JsonLines { path: path.to_path_buf(), lines: reader.lines(), line: 0 }
    }
}

impl<R: BufRead> Iterator for JsonLines<R> {
    type Item = Result<(usize, Map<String, Value>), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let text = match self.lines.next()? {
                Ok(text) => text,
                Err(e) => return Some(Err(ReadError::new(&self.path, None, ReadErrorKind::Io(e)))),
            };
            self.line += 1;
            if text.trim().is_empty() {
                continue;
            }
            let line = self.line;
            return Some(
                serde_json::from_str::<Map<String, Value>>(&text)
                    .map(|object| (line, object))
                    .map_err(|e| ReadError::new(&self.path, Some(line), ReadErrorKind::NotJsonObject(e.to_string()))),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Table, ReadError> {
        Table::from_reader(Path::new("t.tsv"), text.as_bytes())
    }

    fn rows(t: &Table) -> Vec<Vec<&str>> {
        t.rows().map(Iterator::collect).collect()
    }

    #[test]
    fn header_only() {
        for text in ["a\tb\n", "a\tb", "a\tb\r\n"] {
            let t = table(text).unwrap();
            assert_eq!(t.columns, ["a", "b"], "{text:?}");
            assert!(t.is_empty());
        }
    }

    #[test]
    fn an_empty_file_has_no_header() {
        for text in ["", "\n", "\r\n\n"] {
            let e = table(text).unwrap_err();
            assert!(matches!(e.kind, ReadErrorKind::NoHeader), "{text:?}");
            assert_eq!(e.to_string(), "t.tsv:1: empty file: no header line");
        }
    }

    #[test]
    fn trailing_newline_or_none_reads_the_same() {
        let want = [["1", "2"], ["3", "4"]];
        for text in ["a\tb\n1\t2\n3\t4\n", "a\tb\n1\t2\n3\t4", "a\tb\r\n1\t2\r\n3\t4\r\n", "a\tb\n1\t2\n\n3\t4\n\n"] {
            assert_eq!(rows(&table(text).unwrap()), want, "{text:?}");
        }
    }

    #[test]
    fn dash_and_empty_cells_are_text() {
        let t = table("a\tb\tc\n-\t\t10.0.0.1\n").unwrap();
        assert_eq!(rows(&t), [["-", "", "10.0.0.1"]]);
        assert_eq!(t.cell(0, 0), Some("-"));
        assert_eq!(t.cell(0, 1), Some(""));
        assert_eq!(t.cell(0, 3), None);
        assert_eq!(t.column("c"), Some(2));
        assert_eq!(t.column("d"), None);
    }

    #[test]
    fn quotes_are_plain_characters() {
        let t = table("a\tb\n\"x\ty\"\n").unwrap();
        assert_eq!(rows(&t), [["\"x", "y\""]]);
    }

    #[test]
    fn missing_or_extra_fields_name_the_line() {
        let e = table("a\tb\n1\t2\n3\n").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert_eq!(e.to_string(), "t.tsv:3: 1 fields, but the header has 2 columns");
        let e = table("a\tb\n1\t2\t3\n").unwrap_err();
        assert_eq!(e.to_string(), "t.tsv:2: 3 fields, but the header has 2 columns");
        // Blank lines before it still count.
        let e = table("a\tb\n\n1\t2\n\n3\n").unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
    }

    #[test]
    fn bytes_that_are_not_utf8_name_the_line() {
        let mut tsv = TsvReader::new(Path::new("t.tsv"), &b"a\n\xff\n"[..]).unwrap();
        let e = tsv.next_row().unwrap_err().to_string();
        assert!(e.starts_with("t.tsv:2: not UTF-8"), "{e}");
    }

    #[test]
    fn streaming_rows_carry_their_line() {
        let mut tsv = TsvReader::new(Path::new("t.tsv"), "b\ta\n1\t2\n\n3\t4\n".as_bytes()).unwrap();
        assert_eq!(tsv.columns(), ["b", "a"]);
        assert_eq!(tsv.column("a"), Some(1));
        let mut seen = Vec::new();
        while let Some(row) = tsv.next_row().unwrap() {
            seen.push((row.line, row.get(1).unwrap().to_string(), row.len()));
        }
        assert_eq!(seen, [(2, "2".to_string(), 2), (4, "4".to_string(), 2)]);
    }

    #[test]
    fn lenient_reading_leaves_out_bad_rows() {
        let tsv = TsvReader::new(Path::new("t.tsv"), "a\tb\n1\t2\n3\n5\t6\n".as_bytes()).unwrap();
        assert_eq!(rows(&Table::from_tsv_lenient(tsv)), [["1", "2"], ["5", "6"]]);
    }

    #[test]
    fn a_file_on_disk() {
        let dir = std::env::temp_dir().join(format!("sonde-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.tsv");
        std::fs::write(&path, "a\tb\n1\t2\n").unwrap();
        assert_eq!(rows(&Table::from_path(&path).unwrap()), [["1", "2"]]);
        let e = Table::from_path(&dir.join("none.tsv")).unwrap_err();
        assert!(matches!(e.kind, ReadErrorKind::Io(_)) && e.line.is_none(), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_lines() {
        let text = "{\"a\":1,\"b\":\"x\"}\n\n  \nnot json\n[1]\n{\"b\":null}";
        let read: Vec<_> = JsonLines::new(Path::new("f.jsonl"), text.as_bytes()).collect();
        assert_eq!(read.len(), 4);
        let (line, first) = read[0].as_ref().unwrap();
        assert_eq!((*line, first["a"].as_u64(), first["b"].as_str()), (1, Some(1), Some("x")));
        let e = read[1].as_ref().unwrap_err();
        assert!(e.to_string().starts_with("f.jsonl:4: "), "{e}");
        assert_eq!(read[2].as_ref().unwrap_err().line, Some(5));
        let (line, last) = read[3].as_ref().unwrap();
        assert_eq!((*line, last["b"].is_null()), (6, true));
    }
}
