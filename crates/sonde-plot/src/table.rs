//! Reading the tab-separated files of an output directory: a header line names the columns, so
//! a reader finds its columns by name and does not depend on their order or on extra columns.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::error::{io_error, PlotError};

/// A TSV file open for reading, its header already read.
pub(crate) struct Tsv<R> {
    path: PathBuf,
    reader: R,
    header: Vec<String>,
    line: usize,
}

impl Tsv<BufReader<File>> {
    pub(crate) fn open(path: &Path) -> Result<Self, PlotError> {
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        Tsv::new(path, BufReader::new(file))
    }
}

impl<R: BufRead> Tsv<R> {
    /// Reads the header line; `path` names the input in errors.
    pub(crate) fn new(path: &Path, reader: R) -> Result<Self, PlotError> {
        let mut tsv = Tsv { path: path.to_path_buf(), reader, header: Vec::new(), line: 0 };
        let mut buf = Vec::new();
        match tsv.next_line(&mut buf)? {
            Some(header) => tsv.header = header.split('\t').map(|s| s.trim().to_string()).collect(),
            None => return Err(tsv.error_at(1, "empty file: no header line".to_string())),
        }
        Ok(tsv)
    }

    /// The index of a column the caller cannot do without.
    pub(crate) fn column(&self, name: &'static str) -> Result<usize, PlotError> {
        self.optional_column(name).ok_or_else(|| PlotError::MissingColumn { path: self.path.clone(), column: name })
    }

    pub(crate) fn optional_column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// Calls `f` on every non-empty data line, in order; stops at the first error.
    pub(crate) fn for_each_row(
        mut self,
        mut f: impl FnMut(&Row<'_>) -> Result<(), PlotError>,
    ) -> Result<(), PlotError> {
        let mut buf = Vec::new();
        let columns = self.header.len();
        while let Some(text) = self.next_line(&mut buf)? {
            if text.trim().is_empty() {
                continue;
            }
            let fields: Vec<&str> = text.split('\t').collect();
            let row = Row { path: &self.path, line: self.line, fields };
            if row.fields.len() != columns {
                return Err(row.error(format!("{} fields, but the header has {columns} columns", row.fields.len())));
            }
            f(&row)?;
        }
        Ok(())
    }

    /// The next line without its line ending, or `None` at the end of the file.
    fn next_line<'b>(&mut self, buf: &'b mut Vec<u8>) -> Result<Option<&'b str>, PlotError> {
        buf.clear();
        let n = self.reader.read_until(b'\n', buf).map_err(|e| io_error(&self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        match std::str::from_utf8(buf) {
            Ok(s) => Ok(Some(s)),
            Err(e) => Err(self.error_at(self.line, format!("not UTF-8 text ({e})"))),
        }
    }

    fn error_at(&self, line: usize, reason: String) -> PlotError {
        PlotError::Parse { path: self.path.clone(), line, reason }
    }
}

/// One data line, split into fields.
pub(crate) struct Row<'a> {
    path: &'a Path,
    line: usize,
    fields: Vec<&'a str>,
}

impl Row<'_> {
    pub(crate) fn text(&self, column: usize) -> &str {
        self.fields[column].trim()
    }

    /// A finite number, not negative.
    pub(crate) fn number(&self, column: usize, name: &str) -> Result<f64, PlotError> {
        self.optional_number(column, name)?
            .ok_or_else(|| self.error(format!("column `{name}`: `-` where a number is needed")))
    }

    /// As [`Row::number`], but `-` (Tstat's "not measured") gives `None`.
    pub(crate) fn optional_number(&self, column: usize, name: &str) -> Result<Option<f64>, PlotError> {
        let text = self.text(column);
        if text == "-" {
            return Ok(None);
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            _ => Err(self.error(format!("column `{name}`: `{text}` is not a non-negative number"))),
        }
    }

    pub(crate) fn error(&self, reason: String) -> PlotError {
        PlotError::Parse { path: self.path.to_path_buf(), line: self.line, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, wanted: &'static str) -> Result<Vec<f64>, PlotError> {
        let tsv = Tsv::new(Path::new("t.tsv"), text.as_bytes())?;
        let col = tsv.column(wanted)?;
        let mut out = Vec::new();
        tsv.for_each_row(|r| {
            out.push(r.number(col, wanted)?);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn columns_are_found_by_name_in_any_order() {
        assert_eq!(rows("a\tb\n1\t2\n3\t4\n", "b").unwrap(), [2.0, 4.0]);
        assert_eq!(rows("b\ta\r\n1\t2\r\n\r\n3\t4", "b").unwrap(), [1.0, 3.0]);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let e = rows("a\tb\n1\t2\n3\n", "b").unwrap_err().to_string();
        assert_eq!(e, "t.tsv:3: 1 fields, but the header has 2 columns");
        let e = rows("a\tb\n1\tx\n", "b").unwrap_err().to_string();
        assert_eq!(e, "t.tsv:2: column `b`: `x` is not a non-negative number");
        let e = rows("a\tb\n1\t-1\n", "b").unwrap_err().to_string();
        assert_eq!(e, "t.tsv:2: column `b`: `-1` is not a non-negative number");
        let e = rows("a\tb\n1\tNaN\n", "b").unwrap_err().to_string();
        assert!(e.starts_with("t.tsv:2:"), "{e}");
        let e = rows("a\tb\n", "c").unwrap_err().to_string();
        assert_eq!(e, "t.tsv: the header has no column `c`");
        let e = rows("", "c").unwrap_err().to_string();
        assert_eq!(e, "t.tsv:1: empty file: no header line");
        let tsv = Tsv::new(Path::new("t.tsv"), &b"a\n\xff\n"[..]).unwrap();
        let e = tsv.for_each_row(|_| Ok(())).unwrap_err().to_string();
        assert!(e.starts_with("t.tsv:2: not UTF-8"), "{e}");
    }
}
