//! The change file: changes to the set of definitions scheduled by packet time, one a line:
//!
//! ```text
//! # TIME (epoch seconds)  VERSION (made against)  CHANGE
//! 1700000000.25 1 add web = tcp.dport == 80
//! 1700000010 2 replace web = tcp.dport in 80..88
//! 1700000020 3 remove web
//! ```
//!
//! Blank lines and lines starting with `#` are skipped. A change's line is checked when the
//! packets reach its time ([`crate::Counter::schedule`]); this only reads the file's shape.

use crate::{Change, ScheduledChange};

/// A line of a change file that is not `TIME VERSION add|replace|remove WHAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeFileError {
    /// 1-based.
    pub line: usize,
    pub kind: ChangeFileErrorKind,
}

/// What a change file's line lacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeFileErrorKind {
    /// Fewer than four fields.
    Fields,
    /// TIME is not `SECONDS[.FRACTION]` of at most nine decimals, or does not fit in u64 ns.
    Time,
    /// VERSION is not a whole number.
    Version,
    /// The change is not `add`, `replace` or `remove`.
    Operation,
}

impl ChangeFileErrorKind {
    /// What the line should have had.
    pub fn expected(self) -> &'static str {
        match self {
            ChangeFileErrorKind::Fields => "expected TIME VERSION add|replace|remove WHAT",
            ChangeFileErrorKind::Time => "TIME is epoch seconds, up to nine decimals",
            ChangeFileErrorKind::Version => "VERSION is a whole number",
            ChangeFileErrorKind::Operation => "the change is add, replace or remove",
        }
    }
}

impl std::fmt::Display for ChangeFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.kind.expected())
    }
}

impl std::error::Error for ChangeFileError {}

/// The changes of a change file, in the file's order; the first malformed line is an error.
pub fn parse_change_file(text: &str) -> Result<Vec<ScheduledChange>, ChangeFileError> {
    let mut changes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |kind| ChangeFileError { line: i + 1, kind };
        // Fields are split at single whitespace characters: WHAT, the rest, keeps its own.
        let mut parts = line.splitn(4, char::is_whitespace);
        let (Some(time), Some(version), Some(op), Some(rest)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(ChangeFileErrorKind::Fields));
        };
        let at_ns = sonde_types::time::parse_seconds(time).ok_or_else(|| bad(ChangeFileErrorKind::Time))?;
        let expected_version: u64 = version.parse().map_err(|_| bad(ChangeFileErrorKind::Version))?;
        let what = rest.trim().to_string();
        let change = match op {
            "add" => Change::Add(what),
            "replace" => Change::Replace(what),
            "remove" => Change::Remove(what),
            _ => return Err(bad(ChangeFileErrorKind::Operation)),
        };
        changes.push(ScheduledChange { at_ns, expected_version, change });
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_change_and_skips_comments_and_blank_lines() {
        let text = "# made by hand\n\n1700000000.25 1 add web = tcp.dport == 80\n  1700000010 2 replace web = \
                    tcp.dport in 80..88  \n1700000020.000000001 3 remove web\n";
        let changes = parse_change_file(text).unwrap();
        assert_eq!(
            changes,
            [
                ScheduledChange {
                    at_ns: 1_700_000_000_250_000_000,
                    expected_version: 1,
                    change: Change::Add("web = tcp.dport == 80".into())
                },
                ScheduledChange {
                    at_ns: 1_700_000_010_000_000_000,
                    expected_version: 2,
                    change: Change::Replace("web = tcp.dport in 80..88".into())
                },
                ScheduledChange {
                    at_ns: 1_700_000_020_000_000_001,
                    expected_version: 3,
                    change: Change::Remove("web".into())
                },
            ]
        );
        assert_eq!(parse_change_file("# nothing\n"), Ok(vec![]));
    }

    #[test]
    fn a_bad_line_names_its_number_and_what_was_expected() {
        let cases = [
            ("1 1 add", 1, ChangeFileErrorKind::Fields, "line 1: expected TIME VERSION add|replace|remove WHAT"),
            (
                "# c\n1.5s 1 remove a",
                2,
                ChangeFileErrorKind::Time,
                "line 2: TIME is epoch seconds, up to nine decimals",
            ),
            ("\n\n1 v2 remove a", 3, ChangeFileErrorKind::Version, "line 3: VERSION is a whole number"),
            ("1 1 delete a", 1, ChangeFileErrorKind::Operation, "line 1: the change is add, replace or remove"),
            // Two spaces make an empty field: VERSION is then empty.
            ("1  1 remove a", 1, ChangeFileErrorKind::Version, "line 1: VERSION is a whole number"),
        ];
        for (text, line, kind, message) in cases {
            let e = parse_change_file(text).unwrap_err();
            assert_eq!((e.line, e.kind, e.to_string().as_str()), (line, kind, message), "{text:?}");
        }
    }

    #[test]
    fn epoch_seconds_are_read_exactly_or_refused() {
        let epoch_ns = sonde_types::time::parse_seconds;
        assert_eq!(epoch_ns("0"), Some(0));
        assert_eq!(epoch_ns("5."), Some(5_000_000_000));
        assert_eq!(epoch_ns("1.123456789"), Some(1_123_456_789));
        assert_eq!(epoch_ns("18446744073.709551615"), Some(u64::MAX));
        for bad in ["", ".5", "1.1234567891", "18446744073.709551616", "99999999999", "-1", "+1", "1e9", "1.-5"] {
            assert_eq!(epoch_ns(bad), None, "{bad:?}");
        }
    }
}
