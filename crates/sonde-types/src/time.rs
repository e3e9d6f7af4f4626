//! Time as text: packet time (ns since the epoch) written as decimal seconds, read back, and
//! the UTC calendar. Integer arithmetic throughout, so writing and reading are exact and a
//! replayed trace writes the same bytes.

/// Seconds with microseconds (`1700000000.123456`), as every interval file writes packet time.
/// The nanoseconds below the microsecond are dropped, not rounded.
pub fn seconds_6(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

/// Seconds with 9 decimals: exact for nanoseconds, read back by [`parse_seconds_9`] without
/// floating point.
pub fn seconds_9(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Reads exactly what [`seconds_9`] writes (digits, a dot, nine digits); `None` otherwise or
/// past `u64` nanoseconds.
pub fn parse_seconds_9(s: &str) -> Option<u64> {
    let (_, frac) = s.split_once('.')?;
    if frac.len() != 9 {
        return None;
    }
    parse_seconds(s)
}

/// `SECONDS[.FRACTION]` (at most 9 decimals) in ns, exactly (a float would round it); `None`
/// for anything else, or past `u64` nanoseconds.
pub fn parse_seconds(s: &str) -> Option<u64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || frac.len() > 9 || !whole.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns = frac.bytes().chain(std::iter::repeat(b'0')).take(9).fold(0u64, |n, b| n * 10 + u64::from(b - b'0'));
    whole.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the epoch (as the RRD XML export's comments
/// write it).
pub fn utc(t_s: i64) -> String {
    let (year, month, day, h, m, s) = civil(t_s);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02} UTC")
}

/// Year, month, day, hour, minute and second (UTC) of seconds since the epoch, by Howard
/// Hinnant's civil_from_days (proleptic Gregorian, no leap seconds: as Unix time counts).
pub fn civil(t_s: i64) -> (i64, u32, u32, u32, u32, u32) {
    let (days, secs) = (t_s.div_euclid(86_400), t_s.rem_euclid(86_400) as u32);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, secs / 3600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_text() {
        assert_eq!(seconds_6(0), "0.000000");
        assert_eq!(seconds_6(1_700_000_000_123_456_789), "1700000000.123456");
        assert_eq!(seconds_9(1_700_000_300_123_456_789), "1700000300.123456789");
        assert_eq!(seconds_9(1), "0.000000001");
    }

    #[test]
    fn seconds_9_round_trip() {
        for ns in [0, 1, 999_999_999, 1_000_000_000, 1_700_000_300_123_456_789, u64::MAX] {
            assert_eq!(parse_seconds_9(&seconds_9(ns)), Some(ns), "{ns}");
        }
        for bad in
            ["", "1", "0.5", ".000000000", "1.0000000000", "-1.000000000", "1.00000000x", "99999999999.000000000"]
        {
            assert_eq!(parse_seconds_9(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn seconds_with_any_fraction() {
        assert_eq!(parse_seconds("12"), Some(12_000_000_000));
        assert_eq!(parse_seconds("12.5"), Some(12_500_000_000));
        assert_eq!(parse_seconds("0.000000001"), Some(1));
        assert_eq!(parse_seconds("1."), Some(1_000_000_000));
        for bad in ["", ".5", "1.0000000001", "1e3", "-1", "1.2.3", " 1"] {
            assert_eq!(parse_seconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(999_999_900), "2001-09-09 01:45:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(-1), "1969-12-31 23:59:59 UTC");
        assert_eq!(civil(1_709_210_096), (2024, 2, 29, 12, 34, 56));
    }
}
