//! Reading the tab-separated files of an output directory: a header line names the columns, so
//! a reader finds its columns by name and does not depend on their order or on extra columns.
//! The reading itself is sonde-output's ([`sonde_output::read`]); this adds the figures' way
//! of taking numbers and their errors.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use sonde_output::read::{ReadError, ReadErrorKind, TsvReader};

use crate::error::PlotError;

/// A TSV file open for reading, its header already read.
pub(crate) struct Tsv<R> {
    reader: TsvReader<R>,
    /// The column names without surrounding blanks.
    header: Vec<String>,
}

impl Tsv<File> {
    pub(crate) fn open(path: &Path) -> Result<Self, PlotError> {
        Tsv::from_reader(TsvReader::open(path))
    }
}

impl<R: Read> Tsv<R> {
    /// Reads the header line; `path` names the input in errors.
    #[cfg(test)]
    pub(crate) fn new(path: &Path, reader: R) -> Result<Self, PlotError> {
        Tsv::from_reader(TsvReader::new(path, reader))
    }

    fn from_reader(reader: Result<TsvReader<R>, ReadError>) -> Result<Self, PlotError> {
        let reader = reader.map_err(plot_error)?;
        let header = reader.columns().iter().map(|h| h.trim().to_string()).collect();
        Ok(Tsv { reader, header })
    }

    /// The index of a column the caller cannot do without.
    pub(crate) fn column(&self, name: &'static str) -> Result<usize, PlotError> {
        self.optional_column(name)
            .ok_or_else(|| PlotError::MissingColumn { path: self.reader.path().to_path_buf(), column: name })
    }

    pub(crate) fn optional_column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// Calls `f` on every data line, in order; stops at the first error.
    pub(crate) fn for_each_row(
        mut self,
        mut f: impl FnMut(&Row<'_>) -> Result<(), PlotError>,
    ) -> Result<(), PlotError> {
        let path = self.reader.path().to_path_buf();
        loop {
            match self.reader.next_row() {
                Ok(Some(row)) => f(&Row { path: &path, row })?,
                Ok(None) => return Ok(()),
                Err(e) => return Err(plot_error(e)),
            }
        }
    }
}

fn plot_error(e: ReadError) -> PlotError {
    match (e.kind, e.line) {
        (ReadErrorKind::Io(source), _) => PlotError::Io { path: e.path, source },
        (kind, line) => PlotError::Parse { path: e.path, line: line.unwrap_or(0), reason: kind.to_string() },
    }
}

/// One data line, split into fields (as many as the header has columns).
pub(crate) struct Row<'a> {
    path: &'a Path,
    row: sonde_output::read::Row<'a>,
}

impl Row<'_> {
    pub(crate) fn text(&self, column: usize) -> &str {
        self.row.get(column).unwrap_or_default().trim()
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
        PlotError::Parse { path: self.path.to_path_buf(), line: self.row.line, reason }
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
