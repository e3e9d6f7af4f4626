//! Capture timestamps as ns since the Unix epoch, saturating at 0 and `u64::MAX` (year 2554)
//! instead of wrapping.

/// The first time a run refuses: 2261-01-01T00:00:00Z. A packet time from then on is no
/// capture's (a garbage pcapng timestamp, a wrong resolution): the typed outputs keep times as
/// signed 64-bit nanoseconds, which end in April 2262, and an interval or a timeout after such
/// a time would not fit either (the margin holds a year and three months). A run analyses such
/// a frame at `TIME_LIMIT_NS - 1` and counts it (`packets.time_out_of_range`).
pub const TIME_LIMIT_NS: u64 = 9_183_110_400 * 1_000_000_000;

/// Seconds plus a sub-second part already in nanoseconds, saturating instead of overflowing.
#[inline(always)]
pub(crate) fn secs_ns(secs: u64, ns: u64) -> u64 {
    secs.saturating_mul(1_000_000_000).saturating_add(ns)
}

/// Applies a signed offset in seconds (pcapng if_tsoffset), clamping to [0, u64::MAX].
#[inline]
pub(crate) fn add_offset_secs(ts_ns: u64, offset_s: i64) -> u64 {
    if offset_s >= 0 {
        ts_ns.saturating_add((offset_s as u64).saturating_mul(1_000_000_000))
    } else {
        ts_ns.saturating_sub(offset_s.unsigned_abs().saturating_mul(1_000_000_000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_limit_is_2261_and_fits_a_signed_nanosecond_count_with_a_year_to_spare() {
        // 2261-01-01: 291 years of 365 days and the 71 leap days from 1972 to 2260.
        assert_eq!(TIME_LIMIT_NS / 1_000_000_000, (291 * 365 + 71) * 86_400);
        assert!(TIME_LIMIT_NS + 366 * 86_400 * 1_000_000_000 < i64::MAX as u64);
    }

    #[test]
    fn timestamps_saturate_instead_of_wrapping() {
        assert_eq!(secs_ns(2, 5), 2_000_000_005);
        assert_eq!(secs_ns(u64::MAX / 1000, 1), u64::MAX);
        assert_eq!(add_offset_secs(5_000_000_000, -2), 3_000_000_000);
        assert_eq!(add_offset_secs(1_000_000_000, -2), 0);
        assert_eq!(add_offset_secs(1, i64::MIN), 0);
        assert_eq!(add_offset_secs(u64::MAX - 1, 1), u64::MAX);
    }
}
