//! Reading a flow log (`tcp_flows.tsv` / `.jsonl`, `udp_flows.*`) into columns and values.
//! Columns are found by name, so logs of different versions (extra or missing columns) still
//! compare on the columns they share.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use sonde_output::read::{JsonLines, ReadError, ReadErrorKind, TsvReader};

use crate::CompareError;

/// One cell. Numbers compare as numbers, so `124.730` (TSV) equals `124.73` (JSON).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Text(String),
    /// No value: `-` in TSV, null or absent in JSONL.
    Missing,
}

impl Value {
    /// A TSV field: `-` is the logs' "no value" (JSON's null).
    fn parse(text: &str) -> Value {
        if text == "-" {
            return Value::Missing;
        }
        match text.parse::<f64>() {
            Ok(n) if n.is_finite() => Value::Number(n),
            _ => Value::Text(text.to_string()),
        }
    }

    /// Equal, or TSV's `0` for a metric without a sample against JSONL's `null` for it.
    pub fn same_as(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Number(n), Value::Missing) | (Value::Missing, Value::Number(n)) => *n == 0.0,
            _ => self == other,
        }
    }

    pub fn number(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }
}

/// A flow log: its columns in file order, one row of values per flow.
#[derive(Debug, Clone)]
pub struct FlowLog {
    pub path: PathBuf,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

impl FlowLog {
    /// Reads a flow log; JSONL when the name ends in `.jsonl`, TSV otherwise.
    pub fn read(path: &Path) -> Result<FlowLog, CompareError> {
        let file = File::open(path).map_err(|e| CompareError::Io { path: path.to_path_buf(), error: e })?;
        let reader = BufReader::new(file);
        if path.extension().is_some_and(|e| e == "jsonl") {
            FlowLog::parse_jsonl(path, reader)
        } else {
            FlowLog::parse_tsv(path, reader)
        }
    }

    /// A TSV log: a header line of column names, then one line per flow.
    pub fn parse_tsv(path: &Path, reader: impl BufRead) -> Result<FlowLog, CompareError> {
        let mut tsv = TsvReader::new(path, reader).map_err(compare_error)?;
        let mut log = FlowLog { path: path.to_path_buf(), columns: tsv.columns().to_vec(), rows: Vec::new() };
        while let Some(row) = tsv.next_row().map_err(compare_error)? {
            log.rows.push(row.fields().map(Value::parse).collect());
        }
        Ok(log)
    }

    /// A JSONL log: one object per line; the columns are the keys, in name order (serde_json's
    /// map is sorted).
    pub fn parse_jsonl(path: &Path, reader: impl BufRead) -> Result<FlowLog, CompareError> {
        let mut log = FlowLog { path: path.to_path_buf(), columns: Vec::new(), rows: Vec::new() };
        let mut objects = Vec::new();
        for object in JsonLines::new(path, reader) {
            let (_, object) = object.map_err(compare_error)?;
            for key in object.keys() {
                if !log.columns.contains(key) {
                    log.columns.push(key.clone());
                }
            }
            objects.push(object);
        }
        log.rows = objects
            .into_iter()
            .map(|o| {
                let cell = |c: &String| match o.get(c) {
                    None | Some(serde_json::Value::Null) => Value::Missing,
                    Some(serde_json::Value::Number(n)) => n.as_f64().map_or(Value::Missing, Value::Number),
                    // TSV writes flags as 0 and 1.
                    Some(serde_json::Value::Bool(b)) => Value::Number(f64::from(u8::from(*b))),
                    Some(serde_json::Value::String(s)) => Value::parse(s),
                    Some(other) => Value::Text(other.to_string()),
                };
                log.columns.iter().map(cell).collect()
            })
            .collect();
        Ok(log)
    }

    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

fn compare_error(e: ReadError) -> CompareError {
    match e.kind {
        ReadErrorKind::Io(error) => CompareError::Io { path: e.path, error },
        kind => CompareError::Malformed { path: e.path, line: e.line.unwrap_or(0), what: kind.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsv_and_jsonl_read_the_same_values() {
        let tsv = "c_ip\tc_port\tdurat\ttunnel\tcomplete\n10.0.0.1\t80\t124.730\t-\t1\n";
        let jsonl = "{\"c_ip\":\"10.0.0.1\",\"c_port\":80,\"durat\":124.73,\"tunnel\":null,\"complete\":true}\n";
        let a = FlowLog::parse_tsv(Path::new("a.tsv"), tsv.as_bytes()).unwrap();
        let b = FlowLog::parse_jsonl(Path::new("b.jsonl"), jsonl.as_bytes()).unwrap();
        // serde_json's map sorts the keys: compare by name.
        for (i, name) in a.columns.iter().enumerate() {
            assert_eq!(a.rows[0][i], b.rows[0][b.column(name).unwrap()], "{name}");
        }
        assert_eq!(a.rows[0][0], Value::Text("10.0.0.1".into()));
        assert_eq!(a.rows[0][2], Value::Number(124.73));
        assert_eq!((&a.rows[0][3], &a.rows[0][4]), (&Value::Missing, &Value::Number(1.0)));
    }

    #[test]
    fn a_short_line_is_refused_with_its_number() {
        let tsv = "a\tb\n1\t2\n3\n";
        let err = FlowLog::parse_tsv(Path::new("x.tsv"), tsv.as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), "x.tsv:3: 1 fields, but the header has 2 columns");
        let err = FlowLog::parse_jsonl(Path::new("x.jsonl"), "{\"a\":1}\nnot json\n".as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("x.jsonl:2: "), "{err}");
        let err = FlowLog::parse_tsv(Path::new("e.tsv"), "".as_bytes()).unwrap_err();
        assert!(err.to_string().contains("no header"), "{err}");
    }
}
