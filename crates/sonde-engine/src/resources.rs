//! What the process used: CPU time and peak memory, from getrusage(2). Read around a run for
//! the summary, never inside the analysis path.

/// CPU seconds (user + system) used by this process so far.
pub fn cpu_seconds() -> f64 {
    let u = usage();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Peak resident memory in bytes.
pub fn peak_rss_bytes() -> u64 {
    // Linux reports ru_maxrss in KiB.
    (usage().ru_maxrss.max(0) as u64) * 1024
}

fn usage() -> libc::rusage {
    // SAFETY: getrusage only writes into the struct we pass; zeroed is a valid rusage.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_are_plausible() {
        let mut v = vec![0u8; 8 << 20];
        v[12345] = 1;
        assert!(super::peak_rss_bytes() >= 8 << 20);
        assert!(super::cpu_seconds() >= 0.0);
        assert_eq!(v[12345], 1);
    }
}
