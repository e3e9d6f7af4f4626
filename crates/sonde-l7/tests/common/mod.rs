//! Shared by the tests that read real captures and compare with tshark.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use sonde_wire::{LinkType, PacketSummary, Transport as Wire};

/// The shared traces directory (`/work/shared/traces` beside the repository).
pub fn traces_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    assert!(dir.join("INDEX.tsv").is_file(), "the shared traces are missing: no {}", dir.join("INDEX.tsv").display());
    dir
}

/// Paths (relative to the traces directory) from INDEX.tsv whose name matches `pred`.
pub fn indexed(pred: impl Fn(&str) -> bool) -> Vec<String> {
    let index = std::fs::read_to_string(traces_dir().join("INDEX.tsv")).expect("read INDEX.tsv");
    index.lines().skip(1).filter_map(|l| l.split('\t').next()).filter(|p| pred(p)).map(str::to_owned).collect()
}

/// Runs tshark over a trace: one row per frame, the fields asked for, every occurrence joined
/// by U+001F. Fails the test when tshark cannot run.
pub fn tshark(path: &Path, fields: &[&str], extra: &[&str]) -> BTreeMap<u64, Vec<Vec<String>>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-n").arg("-r").arg(path).args(extra).args([
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=\u{1f}",
        "-e",
        "frame.number",
    ]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("tshark could not run ({e}): install it (make test does)"));
    assert!(
        out.status.success() || !out.stdout.is_empty(),
        "tshark failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let mut cols = line.split('\t');
        let Some(Ok(n)) = cols.next().map(str::parse::<u64>) else { continue };
        let vals = cols
            .map(|c| if c.is_empty() { Vec::new() } else { c.split('\u{1f}').map(str::to_owned).collect() })
            .collect();
        rows.insert(n, vals);
    }
    rows
}

/// One frame as decoded by sonde-wire: its number (from 1), time, the IP and transport
/// summaries and the captured payload.
pub struct Decoded<'a> {
    pub number: u64,
    pub ts_ns: u64,
    pub summary: PacketSummary,
    pub payload: &'a [u8],
}

/// Reads every frame of a trace and hands each decoded one to `each`.
pub fn for_each_frame(path: &Path, mut each: impl FnMut(Decoded<'_>)) {
    let mut src = sonde_capture::open(path).unwrap_or_else(|e| panic!("open {}: {e:?}", path.display()));
    let mut number = 0u64;
    // A damaged trace (the robustness ones) ends at its damage, as sonde reads it.
    while let Ok(Some(frame)) = src.next_frame() {
        number += 1;
        let mut summary = PacketSummary::EMPTY;
        let Ok(offsets) =
            sonde_wire::decode_with_offsets(LinkType(frame.link_type), frame.data, frame.wire_len, &mut summary)
        else {
            continue;
        };
        let payload = offsets.payload.and_then(|o| frame.data.get(o as usize..)).unwrap_or(&[]);
        each(Decoded { number, ts_ns: frame.ts_ns, summary, payload });
    }
}

/// A TCP or UDP packet's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ends {
    pub tcp: bool,
    pub src: (IpAddr, u16),
    pub dst: (IpAddr, u16),
}

impl Ends {
    pub fn of(s: &PacketSummary) -> Option<Ends> {
        let ip = s.ip?;
        match s.transport? {
            Wire::Tcp(t) => Some(Ends { tcp: true, src: (ip.src, t.src_port), dst: (ip.dst, t.dst_port) }),
            Wire::Udp(u) => Some(Ends { tcp: false, src: (ip.src, u.src_port), dst: (ip.dst, u.dst_port) }),
            _ => None,
        }
    }

    /// The same key for both directions.
    pub fn key(&self) -> Ends {
        if self.src <= self.dst {
            *self
        } else {
            Ends { tcp: self.tcp, src: self.dst, dst: self.src }
        }
    }
}

/// `f` over every item, on `threads` threads; results in the items' order.
pub fn parallel<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a worker panicked")).collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}
