//! Issue 20, faults: nothing silently lost, no half-written file that looks whole. A full
//! disk, a signal, SIGKILL, two runs into one directory, links planted in the output
//! directory. Each test makes its own traffic; those that mount a tmpfs need root and say
//! SKIPPED without it. docs/faults.md lists each fault, what the run does and what is left.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::sonde;

/// Frame `i` of an endless stream: TCP segments of 4,000 flows (a SYN first, then data both
/// ways) and every 8th a DNS query of its own flow, 10 µs apart. Ethernet.
fn frame(i: u64) -> (u64, Vec<u8>) {
    let ts_us = 1_700_000_000_000_000 + i * 10;
    let flow = (i % 4_000) as u32;
    let round = (i / 4_000) as u32;
    let udp = i % 8 == 7;
    let mut l4 = Vec::new();
    let (client_port, server_port) = (1024 + (flow % 60_000) as u16, if udp { 53 } else { 80 });
    let reply = !udp && round % 2 == 1;
    let (src_port, dst_port) = if reply { (server_port, client_port) } else { (client_port, server_port) };
    l4.extend_from_slice(&src_port.to_be_bytes());
    l4.extend_from_slice(&dst_port.to_be_bytes());
    if udp {
        l4.extend_from_slice(&20u16.to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
        l4.extend_from_slice(&(i as u32).to_be_bytes());
        l4.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0]);
    } else {
        let flags = if round == 0 { 0x02 } else { 0x18 };
        l4.extend_from_slice(&(round * 100).to_be_bytes());
        l4.extend_from_slice(&(round * 100).to_be_bytes());
        l4.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        if round > 0 {
            l4.extend_from_slice(&[b'x'; 100]);
        }
    }
    let (client, server) = ([10, 1, (flow >> 8) as u8, flow as u8], [192, 0, 2, 1]);
    let (src, dst) = if reply { (server, client) } else { (client, server) };
    let mut frame = vec![0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00];
    frame.extend_from_slice(&[0x45, 0]);
    frame.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    frame.extend_from_slice(&(i as u16).to_be_bytes());
    frame.extend_from_slice(&[0, 0, 64, if udp { 17 } else { 6 }, 0, 0]);
    frame.extend_from_slice(&src);
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&l4);
    (ts_us, frame)
}

/// pcap's file header: µs, Ethernet.
fn pcap_header(out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0])?;
    out.write_all(&[0; 8])?;
    out.write_all(&65535u32.to_le_bytes())?;
    out.write_all(&1u32.to_le_bytes())
}

fn pcap_record(out: &mut impl Write, i: u64) -> std::io::Result<()> {
    let (ts_us, frame) = frame(i);
    out.write_all(&((ts_us / 1_000_000) as u32).to_le_bytes())?;
    out.write_all(&((ts_us % 1_000_000) as u32).to_le_bytes())?;
    out.write_all(&(frame.len() as u32).to_le_bytes())?;
    out.write_all(&(frame.len() as u32).to_le_bytes())?;
    out.write_all(&frame)
}

/// A trace of the first `n` frames.
fn trace(path: &Path, n: u64) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    pcap_header(&mut out).unwrap();
    for i in 0..n {
        pcap_record(&mut out, i).unwrap();
    }
    out.flush().unwrap();
}

/// Writes frames into the child's standard input until it closes it (or `limit` frames), in
/// a thread; returns how many it wrote.
fn feed(child: &mut Child, limit: Option<u64>) -> std::thread::JoinHandle<u64> {
    let stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let mut out = std::io::BufWriter::new(stdin);
        let mut i = 0;
        if pcap_header(&mut out).is_err() {
            return 0;
        }
        while limit.is_none_or(|n| i < n) {
            if pcap_record(&mut out, i).is_err() {
                break;
            }
            i += 1;
        }
        let _ = out.flush();
        i
    })
}

fn analyze_stdin(out: &Path, extra: &[&str]) -> Child {
    sonde()
        .args(["analyze", "-q", "-r", "-", "-o"])
        .arg(out)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sonde")
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

/// Waits up to `limit` for the child; kills it (and fails) past that.
fn wait_for(child: &mut Child, limit: Duration) -> ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("sonde did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut text);
    }
    text
}

/// What a directory holds, by name (sorted).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The contract on what a run left in `dir`, whatever stopped it: every file not named
/// `.part` (nor the lock) is whole: summary.json is valid JSON, every text log ends its last
/// line and every line has the header's fields, every Parquet file has its footer. If
/// summary.json is there, every output it lists is. Returns the whole files and the `.part`s.
fn check_whole(dir: &Path) -> (Vec<String>, Vec<String>) {
    let (mut whole, mut parts) = (Vec::new(), Vec::new());
    for name in names(dir) {
        let path = dir.join(&name);
        if name == ".sonde.lock" {
            continue;
        }
        if name.ends_with(".part") {
            parts.push(name);
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        if name.ends_with(".json") {
            let v: serde_json::Value =
                serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name} is not whole JSON: {e}"));
            for listed in v["outputs"].as_array().unwrap() {
                let listed = listed.as_str().unwrap();
                assert!(dir.join(listed).is_file(), "summary.json lists {listed}, which is not there");
            }
        } else if name.ends_with(".tsv") {
            assert!(bytes.ends_with(b"\n"), "{name}: last line cut");
            let text = String::from_utf8(bytes).unwrap();
            let mut lines = text.lines();
            let width = lines.next().unwrap().split('\t').count();
            for (n, line) in lines.enumerate() {
                assert_eq!(line.split('\t').count(), width, "{name}: line {} cut", n + 2);
            }
        } else if name.ends_with(".jsonl") {
            assert!(bytes.ends_with(b"\n") || bytes.is_empty(), "{name}: last line cut");
            for line in String::from_utf8(bytes).unwrap().lines() {
                serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        } else if name.ends_with(".parquet") {
            assert!(bytes.len() >= 8 && bytes.ends_with(b"PAR1"), "{name}: no Parquet footer");
        } else {
            panic!("{name}: a file the run does not write");
        }
        whole.push(name);
    }
    (whole, parts)
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped.
struct Tmpfs {
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn new(size: &str) -> Option<Tmpfs> {
        if !is_root() {
            eprintln!("SKIPPED: mounting a tmpfs needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("mnt");
        std::fs::create_dir(&mount).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("SKIPPED: cannot mount a tmpfs");
            return None;
        }
        Some(Tmpfs { mount, _dir: dir })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}

/// Outputs that do not fit (a 300 KB tmpfs): the run fails (exit 1), names each file that
/// failed and why (stderr and summary.json's `output_errors`), removes their `.part`, still
/// writes every output that fits, and leaves no file under its own name that is not whole.
#[test]
fn a_full_disk_fails_naming_the_file_and_leaves_nothing_cut() {
    let Some(tmpfs) = Tmpfs::new("300k") else { return };
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("t.pcap");
    trace(&input, 40_000);
    for format in ["tsv", "jsonl", "parquet"] {
        let out = tmpfs.mount.join(format);
        let run = sonde()
            .args(["analyze", "-q", "--interval", "1", "--tables", "--format", format, "-r"])
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{format}: {stderr}");
        assert!(stderr.contains("No space left on device"), "{format}: {stderr}");
        assert!(stderr.contains(&out.display().to_string()), "{format}: the file is named: {stderr}");
        let (whole, parts) = check_whole(&out);
        assert!(parts.is_empty(), "{format}: {parts:?} left");
        eprintln!("{format}: {stderr}kept: {whole:?}");
        // The outputs after the first failure were still attempted, summary.json last; when it
        // fits, it names what is missing.
        if !out.join("summary.json").exists() {
            assert!(stderr.contains("summary.json: write failed"), "{format}: {stderr}");
            assert!(whole.len() > 2, "{format}: what fits is kept: {whole:?}");
            std::fs::remove_dir_all(&out).unwrap();
            continue;
        }
        let s = summary(&out);
        let errors: Vec<&str> = s["output_errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
        assert!(!errors.is_empty() && errors.iter().all(|e| e.contains("No space left")), "{format}: {errors:?}");
        for e in &errors {
            assert!(stderr.contains(e), "{format}: {e} not said");
        }
        let listed: Vec<&str> = s["outputs"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
        let mut present: Vec<&str> = whole.iter().map(String::as_str).collect();
        present.sort_unstable();
        let mut listed_sorted = listed.clone();
        listed_sorted.sort_unstable();
        assert_eq!(listed_sorted, present, "{format}: the summary lists exactly what is there");
        assert!(present.len() > 2, "{format}: what fits is kept: {present:?}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}

/// SIGTERM, SIGINT or SIGHUP while analyze reads a trace from a pipe: the input ends there,
/// every output is written whole, exit 0, and the summary says which signal ended it.
#[test]
fn a_signal_ends_analyze_with_every_output_written() {
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")] {
        let out = tempfile::tempdir().unwrap();
        let mut child = analyze_stdin(out.path(), &["--interval", "0.01", "--threads", "2"]);
        let fed = feed(&mut child, None);
        std::thread::sleep(Duration::from_millis(1500));
        assert!(child.try_wait().unwrap().is_none(), "{name}: sonde ended before the signal");
        signal(&child, sig);
        let status = wait_for(&mut child, Duration::from_secs(60));
        let stderr = stderr_of(&mut child);
        let sent = fed.join().unwrap();
        assert!(status.success(), "{name}: {status}: {stderr}");
        let (whole, parts) = check_whole(out.path());
        assert!(parts.is_empty(), "{name}: {parts:?}");
        let s = summary(out.path());
        assert_eq!(s["interrupted_by"], name, "{name}");
        let read = s["packets"]["read"].as_u64().unwrap();
        assert!(read > 1000 && read <= sent, "{name}: {read} of {sent}");
        for file in ["tcp_flows.tsv", "udp_flows.tsv", "intervals.tsv", "summary.json"] {
            assert!(whole.iter().any(|w| w == file), "{name}: {file} missing: {whole:?}");
        }
        let flows = std::fs::read_to_string(out.path().join("tcp_flows.tsv")).unwrap().lines().count() - 1;
        assert_eq!(flows as u64, s["flows"]["tcp"].as_u64().unwrap(), "{name}");
    }
}

/// Issue 21: a compressed trace read by two readers, one inflater feeding both: a signal ends
/// the run though the readers are megabytes apart (the first also counts the intervals). A
/// reader that stops lets go of its source at once, or the inflater would wait for it to take
/// its next bytes, and the other reader for the inflater.
#[test]
fn a_signal_ends_two_readers_of_a_compressed_trace() {
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("t.pcap.gz");
    let file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    pcap_header(&mut gz).unwrap();
    let frames = 1_500_000;
    for i in 0..frames {
        pcap_record(&mut gz, i).unwrap();
    }
    gz.finish().unwrap().flush().unwrap();
    let out = scratch.path().join("out");
    let mut child = sonde()
        .args(["analyze", "-q", "--interval", "0.01", "--threads", "2", "-r"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Signalled once it has read a tenth of the compressed file: in the middle of reading
    // whatever the machine's speed (a fixed delay was sometimes past the reading).
    let size = std::fs::metadata(&input).unwrap().len();
    let io = format!("/proc/{}/io", child.id());
    let read_so_far = || {
        let text = std::fs::read_to_string(&io).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix("rchar: ")).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    let start = std::time::Instant::now();
    while read_so_far() < size / 10 {
        assert!(start.elapsed() < Duration::from_secs(60), "sonde never read its input");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(child.try_wait().unwrap().is_none(), "sonde ended before the signal");
    signal(&child, libc::SIGINT);
    let status = wait_for(&mut child, Duration::from_secs(60));
    let stderr = stderr_of(&mut child);
    assert!(status.success(), "{status}: {stderr}");
    let s = summary(&out);
    assert_eq!(s["interrupted_by"], "SIGINT");
    assert_eq!(s["timing"]["readers"], 2, "two readers");
    assert_eq!(s["compression"], "gzip");
    let read = s["packets"]["read"].as_u64().unwrap();
    assert!(read > 1000 && read < frames, "{read} of {frames}");
}

/// SIGKILL at any moment (reading, sorting, writing the outputs and the store): what is on
/// disk is whole or named `.part`. Killed at growing delays after the input ends, so some kills land in
/// the writing; the next run into the directory removes the `.part` files.
#[test]
fn sigkill_leaves_only_whole_files_or_parts() {
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("t.pcap");
    trace(&input, 200_000);
    let (mut with_parts, mut partial_sets, mut finished) = (0, 0, false);
    let mut delay_ms = 0;
    while !finished {
        let out = scratch.path().join(format!("out-{delay_ms}"));
        let store = scratch.path().join(format!("store-{delay_ms}.rrd"));
        let mut child = sonde()
            .args(["analyze", "-q", "--interval", "1", "--tables", "--threads", "2", "-r"])
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .args(["--store-archives", "1s:10m,1m:1d"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        finished = child.try_wait().unwrap().is_some();
        let _ = child.kill();
        child.wait().unwrap();
        // The store is updated as a copy renamed into place: there or not, never cut.
        if store.exists() {
            let info = sonde().args(["ts", "info"]).arg(&store).output().unwrap();
            assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
        }
        if out.is_dir() {
            let (whole, parts) = check_whole(&out);
            with_parts += usize::from(!parts.is_empty());
            partial_sets += usize::from(!whole.is_empty() && !whole.iter().any(|w| w == "summary.json"));
            if !parts.is_empty() {
                // The next run takes the directory and removes them.
                let run = sonde().args(["analyze", "-q", "--force", "-r"]).arg(&input).arg("-o").arg(&out).output();
                assert!(run.unwrap().status.success());
                assert!(check_whole(&out).1.is_empty());
            }
        }
        delay_ms += 15;
        assert!(delay_ms < 120_000, "the run never finished");
    }
    eprintln!("killed {} times: {with_parts} left .part files, {partial_sets} some outputs only", delay_ms / 15);
}

/// Two runs into one directory: the second is refused at its start (exit 1, a clear
/// message), the first is untouched and finishes.
#[test]
fn a_second_run_into_the_same_directory_is_refused() {
    let out = tempfile::tempdir().unwrap();
    let mut first = analyze_stdin(out.path(), &[]);
    // The first run reads, its input still open, so its outputs are not written yet.
    let mut input_of_first = std::io::BufWriter::new(first.stdin.take().unwrap());
    pcap_header(&mut input_of_first).unwrap();
    (0..50_000).for_each(|i| pcap_record(&mut input_of_first, i).unwrap());
    input_of_first.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("t.pcap");
    trace(&input, 100);
    for force in [false, true] {
        let mut second = sonde();
        second.args(["analyze", "-q", "-r"]).arg(&input).arg("-o").arg(out.path());
        if force {
            second.arg("--force");
        }
        let run = second.output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("in use by another sonde run"), "{stderr}");
    }
    assert!(names(out.path()).iter().all(|n| n == ".sonde.lock"), "{:?}", names(out.path()));
    drop(input_of_first);
    let status = wait_for(&mut first, Duration::from_secs(60));
    assert!(status.success(), "{}", stderr_of(&mut first));
    assert_eq!(summary(out.path())["packets"]["read"], 50_000);
    check_whole(out.path());
}

/// Links planted in the output directory (sonde runs as root): the write probe's name linked
/// to a file does not truncate it, an output's name linked nowhere does not create the
/// target (with --force the link is replaced by the output).
#[test]
fn links_in_the_output_directory_are_not_followed() {
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("t.pcap");
    trace(&input, 1_000);
    let out = scratch.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let victim = scratch.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, out.join(".sonde-write-test")).unwrap();
    let nowhere = scratch.path().join("created-through-a-link");
    std::os::unix::fs::symlink(&nowhere, out.join("tcp_flows.tsv")).unwrap();
    let run = sonde().args(["analyze", "-q", "-r"]).arg(&input).arg("-o").arg(&out).output().unwrap();
    assert_eq!(run.status.code(), Some(1), "a dangling link is an earlier output");
    let run = sonde().args(["analyze", "-q", "--force", "-r"]).arg(&input).arg("-o").arg(&out).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(nowhere.symlink_metadata().is_err(), "the link's target was created");
    assert!(!out.join("tcp_flows.tsv").symlink_metadata().unwrap().file_type().is_symlink());
    check_whole(&out);
}
