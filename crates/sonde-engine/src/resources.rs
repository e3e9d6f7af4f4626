//! What the process used: CPU time (getrusage(2)) and peak memory (/proc/self/status). Read around a run for
//! the summary, never inside the analysis path.

use nix::sys::resource::{getrusage, Usage, UsageWho};
use nix::sys::time::TimeValLike;

/// CPU seconds (user + system) used by this process so far.
pub fn cpu_seconds() -> f64 {
    usage().map_or(0.0, |u| (u.user_time().num_microseconds() + u.system_time().num_microseconds()) as f64 / 1e6)
}

/// Peak resident memory in bytes: the process's own high-water mark (`VmHWM`). getrusage's
/// ru_maxrss is the fallback only: Linux carries the parent's peak into it across fork and
/// exec, so a sonde started by a large process (a test harness, a notebook) would report the
/// parent's memory.
pub fn peak_rss_bytes() -> u64 {
    let hwm = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    });
    // Both in KiB.
    hwm.or_else(|| usage().map(|u| u.max_rss().max(0) as u64)).unwrap_or(0) * 1024
}

/// getrusage(2) cannot fail for RUSAGE_SELF; a failure reads as nothing used.
fn usage() -> Option<Usage> {
    getrusage(UsageWho::RUSAGE_SELF).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_are_plausible() {
        // Every page written, so all 8 MiB are resident (zeroed pages from calloc are not).
        let v = vec![1u8; 8 << 20];
        assert!(super::peak_rss_bytes() >= 8 << 20, "{}", super::peak_rss_bytes());
        assert!(super::cpu_seconds() >= 0.0);
        assert_eq!(v.iter().map(|&b| b as usize).sum::<usize>(), 8 << 20);
    }
}
