//! `--format jsonl` against TSV: one JSON object per line, the same columns and the same values.
//! A directory module, so that it is not a test target of its own.

#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

/// Does a JSON value say the same as a TSV field? TSV writes a missing value as `-` and a
/// metric without a sample as `0` (both JSON null), booleans as 0/1, and milliseconds with 3
/// decimals like JSON does.
fn same(tsv: &str, json: &Value) -> bool {
    match json {
        Value::Null => ["-", "0", "0.000"].contains(&tsv) || tsv.parse::<f64>().is_ok_and(|x| !x.is_finite()),
        Value::Bool(b) => tsv == if *b { "1" } else { "0" },
        Value::String(s) => tsv == s,
        Value::Number(n) => match (n.as_u64(), tsv.parse::<u64>()) {
            (Some(a), Ok(b)) => a == b,
            _ => n.as_f64().is_some_and(|a| tsv.parse::<f64>().is_ok_and(|b| a == b)),
        },
        _ => false,
    }
}

/// Returns what differs between a TSV flow log and its JSON Lines twin (empty when they agree).
pub fn differences(tsv_path: &Path, jsonl_path: &Path) -> Vec<String> {
    let tsv = std::fs::read_to_string(tsv_path).unwrap_or_else(|e| panic!("{}: {e}", tsv_path.display()));
    let jsonl = std::fs::read_to_string(jsonl_path).unwrap_or_else(|e| panic!("{}: {e}", jsonl_path.display()));
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next().expect("TSV header").split('\t').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
    let objects: Vec<&str> = jsonl.lines().collect();
    let mut diffs = Vec::new();
    if rows.len() != objects.len() {
        diffs.push(format!("{} TSV rows, {} JSON lines", rows.len(), objects.len()));
    }
    for (i, (row, line)) in rows.iter().zip(&objects).enumerate() {
        let obj = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => o,
            Ok(other) => {
                diffs.push(format!("line {}: not an object: {other}", i + 1));
                continue;
            }
            Err(e) => {
                diffs.push(format!("line {}: invalid JSON ({e}): {line}", i + 1));
                continue;
            }
        };
        if obj.len() != header.len() {
            diffs.push(format!("line {}: {} keys, TSV has {} columns", i + 1, obj.len(), header.len()));
        }
        for (name, field) in header.iter().zip(row) {
            match obj.get(*name) {
                Some(v) if same(field, v) => {}
                Some(v) => diffs.push(format!("line {} {name}: TSV {field:?}, JSON {v}", i + 1)),
                None => diffs.push(format!("line {}: no key {name}", i + 1)),
            }
        }
    }
    diffs
}

/// Fails with the first differences between a TSV flow log and its JSON Lines twin.
pub fn assert_same(tsv_path: &Path, jsonl_path: &Path) {
    let diffs = differences(tsv_path, jsonl_path);
    assert!(
        diffs.is_empty(),
        "{} vs {}: {} differences, first:\n{}",
        tsv_path.display(),
        jsonl_path.display(),
        diffs.len(),
        diffs.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
