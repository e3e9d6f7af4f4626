//! Helpers shared by the integration tests: locating ../shared, running the binary, reading
//! its TSV outputs.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shared corpus (`$SONDE_SHARED`, else `<repo>/../shared`), if present on this machine.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("SONDE_SHARED") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("SKIPPED: no shared corpus at {} (set SONDE_SHARED)", dir.display());
        None
    }
}

pub fn sonde() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sonde"))
}

/// Runs `sonde analyze` on `trace` into a fresh directory and returns it.
pub fn analyze(trace: &Path, extra: &[&str]) -> (tempfile::TempDir, std::process::Output) {
    let out = tempfile::tempdir().expect("temp dir");
    let output = sonde()
        .arg("analyze")
        .arg("-q")
        .arg("--force")
        .arg("-r")
        .arg(trace)
        .arg("-o")
        .arg(out.path())
        .args(extra)
        .output()
        .expect("run sonde");
    (out, output)
}

/// A TSV flow log as rows of column name → value.
pub fn read_tsv(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().expect("header").split('\t').map(str::to_string).collect();
    lines
        .map(|l| {
            let fields: Vec<&str> = l.split('\t').collect();
            assert_eq!(fields.len(), header.len(), "row width in {}", path.display());
            header.iter().cloned().zip(fields.iter().map(|s| s.to_string())).collect()
        })
        .collect()
}

pub fn num(row: &HashMap<String, String>, col: &str) -> f64 {
    row.get(col)
        .unwrap_or_else(|| panic!("no column {col}"))
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

pub fn int(row: &HashMap<String, String>, col: &str) -> u64 {
    num(row, col) as u64
}

/// (client ip, client port, server ip, server port) of a flow row.
pub fn tuple(row: &HashMap<String, String>) -> (String, u64, String, u64) {
    (row["c_ip"].clone(), int(row, "c_port"), row["s_ip"].clone(), int(row, "s_port"))
}

/// tshark's values of `fields` (tab-separated, one line per frame) for the frames of `trace`
/// matching the display filter `filter` (tshark is installed by `make deps`).
pub fn tshark(trace: &Path, filter: &str, fields: &[&str]) -> Vec<String> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(trace).args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("tshark: {e} (make deps installs it)"));
    assert!(out.status.success(), "tshark {filter}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

/// Runs `node SCRIPT URL ARTIFACTS ARGS…` (tests/browser) with `node` (the command, perhaps in a
/// network namespace) against the dashboard at `url`; checks that it passed at least
/// `min_checks` checks and failed none. Returns where the screenshots went.
pub fn browser_test(
    mut node: Command,
    browser: &(PathBuf, String),
    script: &str,
    url: &str,
    args: &[&str],
    min_checks: u32,
) -> PathBuf {
    let (browser_dir, chromium) = browser;
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-artifacts");
    let started = std::time::Instant::now();
    let run = node
        .current_dir(browser_dir)
        .arg(script)
        .arg(url)
        .arg(&artifacts)
        .args(args)
        .env("CHROMIUM", chromium)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    eprintln!("{script}: {:.1} s; screenshots in {}", started.elapsed().as_secs_f64(), artifacts.display());
    assert!(run.status.success(), "the browser test {script} failed");
    let checks = stdout.lines().find_map(|l| l.strip_suffix(" passed, 0 failed")?.parse::<u32>().ok());
    assert!(checks.is_some_and(|n| n >= min_checks), "{stdout}");
    artifacts
}

/// The browser test's needs: node, chromium and tests/browser's packages; `None` (SKIPPED
/// printed) without.
pub fn browser() -> Option<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let node_ok = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    let missing = if !node_ok {
        Some("node")
    } else if !Path::new(&chromium).exists() {
        Some("chromium")
    } else if !dir.join("node_modules/playwright-core").is_dir() {
        Some("tests/browser/node_modules (npm ci)")
    } else {
        None
    };
    if let Some(what) = missing {
        eprintln!("SKIPPED: no {what} for the browser test (make deps installs them)");
        return None;
    }
    Some((dir, chromium))
}

/// A flood written by `bench/flood.py` (`kind`: syn, udp, scan, frag, concurrent) in `dir`.
pub fn flood_pcap(dir: &Path, kind: &str, packets: u32) -> PathBuf {
    let path = dir.join(format!("{kind}-{packets}.pcap"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/flood.py");
    let status = Command::new("python3").arg(script).arg(kind).arg(packets.to_string()).arg(&path).status();
    assert!(status.is_ok_and(|s| s.success()), "bench/flood.py {kind} {packets}");
    path
}

/// `sonde analyze` arguments for Tstat's layout as Tstat 3.3 runs by default: its logs, no
/// interval files, every address internal (Tstat without `-N`).
pub const TSTAT_LAYOUT_ARGS: [&str; 6] = ["--layout", "tstat", "--interval", "0", "--internal", "0.0.0.0/0,::/0"];

/// One of Tstat's logs (Tstat's own or sonde's `--layout tstat`): the names of its header
/// (positions dropped) and its rows, split on spaces as Tstat writes them.
pub struct TstatLog {
    pub names: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl TstatLog {
    pub fn read(path: &Path) -> TstatLog {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_else(|| panic!("{}: no header", path.display()));
        let names: Vec<String> = header
            .trim_start_matches("#15#")
            .trim_start_matches('#')
            .split(' ')
            .map(|f| f.rsplit_once(':').map_or(f, |(name, _)| name).to_string())
            .collect();
        let rows: Vec<Vec<String>> = lines.map(|l| l.split(' ').map(str::to_string).collect()).collect();
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row.len(), names.len(), "{} line {}: {} fields", path.display(), i + 2, row.len());
        }
        TstatLog { names, rows }
    }

    pub fn col(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
}

/// Tstat's run folder for a capture (`rel` as under ../shared/tstat: `groundtruth/x.pcap`, or
/// a path under ../shared/traces).
pub fn tstat_run(shared: &Path, rel: &str) -> PathBuf {
    let run = shared.join("tstat").join(rel).join("run");
    std::fs::read_dir(&run)
        .unwrap_or_else(|e| panic!("{}: {e}", run.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no Tstat run in {}", run.display()))
}

/// The traces the anonymisation tests run on: the demo, and from ../shared (when present) the
/// ground truth `mixed` and `ipv6` and a real Skype trace.
pub fn anonymize_traces() -> Vec<PathBuf> {
    let mut traces = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")];
    if let Some(shared) = shared_dir() {
        traces.extend(
            [
                "groundtruth/mixed.pcap",
                "groundtruth/ipv6.pcap",
                "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
            ]
            .iter()
            .map(|rel| shared.join(rel))
            .filter(|p| p.exists()),
        );
    }
    traces
}

/// Sends `child` the signal `name` (`kill -NAME`: INT, TERM, …) and waits at most 20 s for it to
/// exit; its exit status.
pub fn stop_with(child: &mut std::process::Child, name: &str) -> std::process::ExitStatus {
    let sent = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap();
    assert!(sent.success(), "kill -{name}");
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(20) {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("sonde did not stop on SIG{name}");
}
