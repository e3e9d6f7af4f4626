//! Tick positions and tick labels: SI prefixes (k, M, G), durations, and UTC times on ticks that
//! fall on whole minutes, hours or days.

/// `v` with at most `digits` significant digits and no trailing zeros: 1500 → "1500",
/// 2.50 → "2.5", 0.0333 → "0.0333".
pub fn trim_number(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".to_string();
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A value with an SI prefix, 3 significant digits: 1234 → "1.23k", 2.5e9 → "2.5G", 0.5 → "0.5".
/// The sign is dropped: below the axis is a direction, not a negative amount.
pub fn si(v: f64) -> String {
    let a = v.abs();
    for (scale, prefix) in [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        // 999.95k would print as "1000k": promote it.
        if a >= scale * 0.99995 {
            return format!("{}{prefix}", trim_number(a / scale, 3));
        }
    }
    trim_number(a, 3)
}

/// A duration in seconds on a log axis: "100 µs", "10 ms", "1 s", "2 min", "3 h", "2 d".
pub fn duration(s: f64) -> String {
    let (v, unit) = if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else if s < 60.0 {
        (s, "s")
    } else if s < 3600.0 {
        (s / 60.0, "min")
    } else if s < 86400.0 {
        (s / 3600.0, "h")
    } else {
        (s / 86400.0, "d")
    };
    format!("{} {unit}", trim_number(v, 3))
}

/// Ticks for a log axis over `[lo, hi]`: the powers of ten inside, plus 2× and 5× when that
/// gives fewer than four.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo) {
        return vec![lo];
    }
    let decades = |mults: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        let mut p = 10f64.powi(lo.log10().floor() as i32);
        while p <= hi * (1.0 + 1e-9) {
            for m in mults {
                let t = p * m;
                if t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9) {
                    out.push(t);
                }
            }
            p *= 10.0;
        }
        out
    };
    let mut ticks = decades(&[1.0]);
    if ticks.len() < 4 {
        ticks = decades(&[1.0, 2.0, 5.0]);
    }
    if ticks.is_empty() {
        ticks = vec![lo, hi];
    }
    ticks
}

/// The largest 1, 2 or 5 × 10^k not above `v` (`v` > 0).
fn nice_floor(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0].iter().map(|m| m * p).find(|&t| t <= v * (1.0 + 1e-9)).unwrap_or(p)
}

/// Ticks on a round step (1, 2 or 5 × 10^k) for a value axis over `[lo, hi]` (`lo` ≤ 0 ≤ `hi`),
/// at most about `max`; a side too short for a whole step still gets one tick, so the values
/// below the axis can be read too.
pub fn value_ticks(lo: f64, hi: f64, max: usize) -> Vec<f64> {
    let span = hi - lo;
    if span.is_nan() || span <= 0.0 {
        return vec![0.0];
    }
    let mut step = nice_floor(span / max.max(1) as f64);
    if span / step > max as f64 {
        step = nice_floor(step * 2.5);
    }
    let mut ticks: Vec<f64> =
        ((lo / step).ceil() as i64..=(hi / step).floor() as i64).map(|i| i as f64 * step).collect();
    if lo < 0.0 && !ticks.iter().any(|&t| t < 0.0) {
        ticks.insert(0, -nice_floor(-lo * 0.9));
    }
    if hi > 0.0 && !ticks.iter().any(|&t| t > 0.0) {
        ticks.push(nice_floor(hi * 0.9));
    }
    ticks
}

/// Ticks for a log axis of durations in seconds over `[lo, hi]`: decades below a second, then
/// 1 s, 10 s, 1 min, 10 min, 1 h, 10 h, 1 d, 10 d, 100 d; plain log ticks when fewer than 3 fit.
pub fn duration_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const MARKS: [f64; 16] = [
        1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 60.0, 600.0, 3600.0, 36000.0, 86400.0, 864000.0, 8640000.0,
        86400000.0,
    ];
    let ticks: Vec<f64> = MARKS.iter().copied().filter(|&t| t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9)).collect();
    if ticks.len() < 3 {
        log_ticks(lo, hi)
    } else {
        ticks
    }
}

/// Tick steps for time axes, in seconds.
const TIME_STEPS: [f64; 24] = [
    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0,
    43200.0, 86400.0, 172800.0, 604800.0, 1209600.0, 2592000.0, 7776000.0, 31536000.0,
];

/// At most `max` ticks on whole multiples of a round step (epoch-aligned: midnights UTC).
pub fn time_ticks(start_s: f64, end_s: f64, max: usize) -> Vec<f64> {
    let span = (end_s - start_s).max(1e-3);
    let step = TIME_STEPS.iter().copied().find(|&st| span / st <= max as f64).unwrap_or(span / max as f64);
    let mut t = (start_s / step).ceil() * step;
    let mut out = Vec::new();
    while t <= end_s + 1e-9 {
        out.push(t);
        t += step;
    }
    out
}

/// How much of a timestamp a time axis shows, chosen from the span it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeStyle {
    Seconds,
    Minutes,
    DayMinutes,
    Days,
}

impl TimeStyle {
    pub fn for_span(span_s: f64) -> TimeStyle {
        if span_s <= 600.0 {
            TimeStyle::Seconds
        } else if span_s <= 86400.0 {
            TimeStyle::Minutes
        } else if span_s <= 14.0 * 86400.0 {
            TimeStyle::DayMinutes
        } else {
            TimeStyle::Days
        }
    }

    /// A UTC label for epoch second `t`.
    pub fn label(self, t: f64) -> String {
        let (y, mo, d, h, mi, s) = utc(t);
        match self {
            TimeStyle::Seconds => format!("{h:02}:{mi:02}:{s:02}"),
            TimeStyle::Minutes => format!("{h:02}:{mi:02}"),
            TimeStyle::DayMinutes => format!("{mo:02}-{d:02} {h:02}:{mi:02}"),
            TimeStyle::Days => format!("{y}-{mo:02}-{d:02}"),
        }
    }
}

/// "2026-11-22 04:26:37": the full UTC time, for axis descriptions.
pub fn utc_label(t: f64) -> String {
    let (y, mo, d, h, mi, s) = utc(t);
    format!("{y}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
}

/// UTC calendar fields of epoch seconds `t` (the fraction dropped).
fn utc(t: f64) -> (i64, u32, u32, u32, u32, u32) {
    sonde_types::time::civil(t.floor() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_labels() {
        let cases = [(0.0, "0"), (0.5, "0.5"), (12.0, "12"), (999.0, "999"), (1000.0, "1k"), (1234.0, "1.23k")];
        for (v, s) in cases {
            assert_eq!(si(v), s, "{v}");
        }
        assert_eq!(si(-2.5e9), "2.5G");
        assert_eq!(si(999_990.0), "1M");
        assert_eq!(si(150e6), "150M");
        assert_eq!(trim_number(0.03333, 3), "0.0333");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(0.0005), "500 µs");
        assert_eq!(duration(0.01), "10 ms");
        assert_eq!(duration(1.0), "1 s");
        assert_eq!(duration(90.0), "1.5 min");
        assert_eq!(duration(7200.0), "2 h");
        assert_eq!(duration(172800.0), "2 d");
    }

    #[test]
    fn duration_tick_choice() {
        let labels: Vec<String> = duration_ticks(0.005, 5000.0).into_iter().map(duration).collect();
        assert_eq!(labels, ["10 ms", "100 ms", "1 s", "10 s", "1 min", "10 min", "1 h"]);
        assert_eq!(duration_ticks(2.0, 50.0), [2.0, 5.0, 10.0, 20.0, 50.0]);
    }

    #[test]
    fn value_tick_choice() {
        assert_eq!(value_ticks(0.0, 53.0, 7), [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        // The 8 below the axis is shorter than a step: one tick at 5.
        assert_eq!(value_ticks(-8.0, 53.0, 7), [-5.0, 0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        assert_eq!(value_ticks(-1.0, 1.0, 7), [-1.0, -0.5, 0.0, 0.5, 1.0]);
        assert_eq!(value_ticks(-3.0, 0.0, 7), [-3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0]);
    }

    #[test]
    fn log_tick_choice() {
        assert_eq!(log_ticks(0.5, 20000.0), [1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(log_ticks(3.0, 300.0), [5.0, 10.0, 20.0, 50.0, 100.0, 200.0]);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_label(0.0), "1970-01-01 00:00:00");
        // 2024-02-29 12:34:56 UTC (a leap day).
        assert_eq!(utc_label(1_709_210_096.0), "2024-02-29 12:34:56");
        assert_eq!(utc_label(1_795_307_597.062), "2026-11-22 00:33:17");
        assert_eq!(TimeStyle::DayMinutes.label(1_709_210_096.0), "02-29 12:34");
    }

    #[test]
    fn time_ticks_fall_on_round_times() {
        // 10:07 to 13:52: hourly ticks at 11, 12, 13 h.
        let day = 19_000.0 * 86400.0;
        let ticks = time_ticks(day + 10.0 * 3600.0 + 420.0, day + 13.0 * 3600.0 + 3120.0, 4);
        assert_eq!(ticks, [day + 11.0 * 3600.0, day + 12.0 * 3600.0, day + 13.0 * 3600.0]);
        let ticks = time_ticks(day, day + 3.0 * 86400.0, 8);
        assert_eq!(ticks.len(), 7, "{ticks:?}");
    }
}
