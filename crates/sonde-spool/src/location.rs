//! A storage location as given on the command line: `PATH` or `PATH:QUOTA`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A directory outputs may go to, with an optional byte quota (`None`: no quota).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub quota_bytes: Option<u64>,
}

/// Why a `PATH[:QUOTA]` string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationParseError {
    pub input: String,
    pub problem: QuotaProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaProblem {
    EmptyPath,
    EmptyQuota,
    /// Not digits followed by at most one of K, M, G, T.
    NotAQuota,
    Zero,
    TooLarge,
}

impl fmt::Display for LocationParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = &self.input;
        match self.problem {
            QuotaProblem::EmptyPath => {
                write!(f, "'{input}': no directory before the quota (expected PATH or PATH:QUOTA)")
            }
            QuotaProblem::EmptyQuota => {
                write!(f, "'{input}': nothing after ':' (expected PATH or PATH:QUOTA, e.g. /data:20G)")
            }
            QuotaProblem::NotAQuota => write!(
                f,
                "'{input}': the quota after the last ':' must be a whole number of bytes, optionally followed by \
                 K, M, G or T (powers of 1024), e.g. 4096, 500M, 20G, 1T"
            ),
            QuotaProblem::Zero => {
                write!(f, "'{input}': a quota of 0 bytes leaves no room (omit ':QUOTA' for no quota)")
            }
            QuotaProblem::TooLarge => write!(f, "'{input}': the quota does not fit in 64 bits of bytes"),
        }
    }
}

impl std::error::Error for LocationParseError {}

/// `PATH` or `PATH:QUOTA`; the quota follows the last ':', so a path holding ':' needs a quota.
impl FromStr for Location {
    type Err = LocationParseError;

    fn from_str(s: &str) -> Result<Location, LocationParseError> {
        let fail = |problem| LocationParseError { input: s.to_string(), problem };
        let Some((path, quota)) = s.rsplit_once(':') else {
            if s.is_empty() {
                return Err(fail(QuotaProblem::EmptyPath));
            }
            return Ok(Location { path: PathBuf::from(s), quota_bytes: None });
        };
        if path.is_empty() {
            return Err(fail(QuotaProblem::EmptyPath));
        }
        let quota_bytes = parse_quota_bytes(quota).map_err(fail)?;
        Ok(Location { path: PathBuf::from(path), quota_bytes: Some(quota_bytes) })
    }
}

/// `4096`, `500M`, `20G`, `1T` (K/M/G/T = 1024^n; lower case accepted).
pub fn parse_quota_bytes(quota: &str) -> Result<u64, QuotaProblem> {
    if quota.is_empty() {
        return Err(QuotaProblem::EmptyQuota);
    }
    let (digits, shift) = match quota.as_bytes()[quota.len() - 1].to_ascii_uppercase() {
        b'K' => (&quota[..quota.len() - 1], 10),
        b'M' => (&quota[..quota.len() - 1], 20),
        b'G' => (&quota[..quota.len() - 1], 30),
        b'T' => (&quota[..quota.len() - 1], 40),
        _ => (quota, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(QuotaProblem::NotAQuota);
    }
    let number: u64 = digits.parse().map_err(|_| QuotaProblem::TooLarge)?;
    let bytes = number.checked_mul(1u64 << shift).ok_or(QuotaProblem::TooLarge)?;
    if bytes == 0 {
        return Err(QuotaProblem::Zero);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Location, QuotaProblem> {
        s.parse::<Location>().map_err(|e| e.problem)
    }

    #[test]
    fn good_locations() {
        assert_eq!(parse("/data"), Ok(Location { path: "/data".into(), quota_bytes: None }));
        assert_eq!(parse("/data:4096").unwrap().quota_bytes, Some(4096));
        assert_eq!(parse("/data:1K").unwrap().quota_bytes, Some(1024));
        assert_eq!(parse("/data:500M").unwrap().quota_bytes, Some(500 << 20));
        assert_eq!(parse("/data:20G").unwrap().quota_bytes, Some(20 << 30));
        assert_eq!(parse("/data:20g").unwrap().quota_bytes, Some(20 << 30));
        assert_eq!(parse("/data:1T").unwrap().quota_bytes, Some(1 << 40));
        assert_eq!(parse("rel/dir:7"), Ok(Location { path: "rel/dir".into(), quota_bytes: Some(7) }));
        // The quota follows the last ':'.
        assert_eq!(parse("/mnt/a:b:2M"), Ok(Location { path: "/mnt/a:b".into(), quota_bytes: Some(2 << 20) }));
        assert_eq!(parse("/data:16777215T").unwrap().quota_bytes, Some(16_777_215 << 40));
    }

    #[test]
    fn bad_locations() {
        assert_eq!(parse(""), Err(QuotaProblem::EmptyPath));
        assert_eq!(parse(":20G"), Err(QuotaProblem::EmptyPath));
        assert_eq!(parse("/data:"), Err(QuotaProblem::EmptyQuota));
        for quota in ["G", "20GB", "1.5G", "-5", "+5", " 5", "5 ", "20X", "0x10", "big", "5KK"] {
            assert_eq!(parse(&format!("/data:{quota}")), Err(QuotaProblem::NotAQuota), "{quota}");
        }
        assert_eq!(parse("/data:0"), Err(QuotaProblem::Zero));
        assert_eq!(parse("/data:0G"), Err(QuotaProblem::Zero));
        assert_eq!(parse("/data:16777216T"), Err(QuotaProblem::TooLarge));
        assert_eq!(parse("/data:99999999999999999999"), Err(QuotaProblem::TooLarge));
    }

    #[test]
    fn messages_say_what_is_expected() {
        let e = "/data:20GB".parse::<Location>().unwrap_err().to_string();
        assert!(e.contains("'/data:20GB'") && e.contains("500M"), "{e}");
        let e = "/data:0".parse::<Location>().unwrap_err().to_string();
        assert!(e.contains("no quota"), "{e}");
    }
}
