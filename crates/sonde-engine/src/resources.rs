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

/// Resident memory by kind (/proc/self/status), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resident {
    /// Anonymous pages (`RssAnon`): the heap, stacks — what the analysis itself holds.
    pub anon_bytes: u64,
    /// Mapped file and shared pages (`RssFile` + `RssShmem`): a memory-mapped trace, the
    /// AF_PACKET ring (the kernel's pages mapped in whole), the program's own code.
    pub file_bytes: u64,
}

impl Resident {
    /// The larger of each kind.
    pub fn max(self, other: Resident) -> Resident {
        Resident {
            anon_bytes: self.anon_bytes.max(other.anon_bytes),
            file_bytes: self.file_bytes.max(other.file_bytes),
        }
    }
}

/// Resident memory now, by kind; `None` without /proc.
pub fn resident() -> Option<Resident> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    };
    let anon_bytes = kib("RssAnon:")? * 1024;
    let file_bytes = (kib("RssFile:")? + kib("RssShmem:").unwrap_or(0)) * 1024;
    Some(Resident { anon_bytes, file_bytes })
}

/// How often [`PeakSampler`] looks.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// The peaks of [`resident`] over a run: /proc keeps a high-water mark of the whole resident
/// set only (`VmHWM`), which counts a mapped trace and a live capture's ring; anonymous memory
/// has none, so a thread of its own samples it every 20 ms (a spike shorter than that may be
/// missed), and once more at the end.
pub struct PeakSampler {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Sampled>,
}

/// What [`PeakSampler`] saw over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sampled {
    /// The peak of each kind.
    pub peak: Resident,
    /// The mean of the anonymous memory over the samples (NetSniff's mean process size).
    pub mean_anon_bytes: u64,
}

impl PeakSampler {
    pub fn start() -> PeakSampler {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sonde-memory".into())
            .spawn(move || {
                let first = resident().unwrap_or_default();
                let (mut peak, mut sum, mut samples) = (first, u128::from(first.anon_bytes), 1u128);
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(SAMPLE_EVERY) {
                    let now = resident().unwrap_or_default();
                    peak = peak.max(now);
                    (sum, samples) = (sum + u128::from(now.anon_bytes), samples + 1);
                }
                Sampled { peak, mean_anon_bytes: u64::try_from(sum / samples).unwrap_or(u64::MAX) }
            })
            .expect("spawn the memory sampler");
        PeakSampler { stop, thread }
    }

    /// The peaks seen, the present included, and the mean.
    pub fn finish(self) -> Sampled {
        let _ = self.stop.send(());
        let sampled = self.thread.join().unwrap_or_default();
        Sampled { peak: sampled.peak.max(resident().unwrap_or_default()), ..sampled }
    }
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

    /// Heap memory counts as anonymous, and its peak is kept after it is freed. (Mapped
    /// pages, `file_bytes`, are checked by the binary's test with a capture ring:
    /// tests/live_faults.rs.)
    #[test]
    fn the_anonymous_peak_outlives_the_memory() {
        let sampler = super::PeakSampler::start();
        let before = super::resident().unwrap();
        let heap = vec![1u8; 48 << 20];
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert_eq!(heap.iter().step_by(4096).map(|&b| usize::from(b)).sum::<usize>(), 48 << 8);
        drop(heap);
        let sampled = sampler.finish();
        let peak = sampled.peak;
        assert!(peak.anon_bytes >= before.anon_bytes + (40 << 20), "{before:?} {peak:?}");
        assert!(peak.file_bytes > 0, "the program's own code is mapped: {peak:?}");
        // The mean is of the samples: at most the peak, and more than nothing.
        assert!(sampled.mean_anon_bytes > 0 && sampled.mean_anon_bytes <= peak.anon_bytes, "{sampled:?}");
    }
}
