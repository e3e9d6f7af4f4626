//! The spool against a real file system (temporary directories).

use std::fs;
use std::path::{Path, PathBuf};

use crate::{Location, Spool, SpoolError, MANIFEST_HEADER, PART_SUFFIX};

fn location(root: &Path, name: &str, quota_bytes: Option<u64>) -> Location {
    Location { path: root.join(name), quota_bytes }
}

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// The contract: every listed file exists whole (its listed size), no `.part` file remains, and
/// every file in a chunk directory is listed. Returns the listed bytes still present.
fn check_location(dir: &Path) -> u64 {
    let text = fs::read_to_string(dir.join("manifest.tsv")).unwrap_or_default();
    let mut lines = text.lines();
    let mut listed = Vec::new();
    if let Some(header) = lines.next() {
        assert_eq!(header, MANIFEST_HEADER);
    }
    let mut present_bytes = 0;
    for line in lines {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 6, "{line}");
        let path = dir.join(fields[0]).join(fields[1]);
        listed.push(path.clone());
        // A listed file may only be missing if it was moved away (the tests move whole chunks).
        if let Ok(meta) = fs::metadata(&path) {
            assert_eq!(meta.len(), fields[2].parse::<u64>().unwrap(), "{}", path.display());
            present_bytes += meta.len();
        }
    }
    for chunk in fs::read_dir(dir).unwrap() {
        let chunk = chunk.unwrap().path();
        if chunk.is_dir() {
            for file in fs::read_dir(&chunk).unwrap() {
                let file = file.unwrap().path();
                assert!(!file.to_string_lossy().ends_with(PART_SUFFIX), "{}", file.display());
                assert!(listed.contains(&file), "{} not listed", file.display());
            }
        }
    }
    present_bytes
}

fn check_all(spool: &Spool) {
    for stats in spool.stats().locations {
        check_location(&stats.path);
    }
}

#[test]
fn fills_a_then_continues_in_b() {
    let root = tempfile::tempdir().unwrap();
    let mut spool =
        Spool::open(vec![location(root.path(), "a", Some(1000)), location(root.path(), "b", None)]).unwrap();
    let data = bytes(400);
    let mut placed_in = Vec::new();
    for (i, chunk) in ["c1", "c2", "c3", "c4"].into_iter().enumerate() {
        let first_ns = i as u64 * 300_000_000_000;
        let files: [(&str, &[u8]); 2] = [("intervals.tsv", &data[..300]), ("tcp_flows.tsv", &data[..100])];
        let placed = spool.write_chunk(chunk, first_ns, first_ns + 300_000_000_000, &files).unwrap();
        assert_eq!(placed.bytes, 400);
        assert!(!placed.over_quota && placed.failed.is_empty());
        assert_eq!(placed.dir, root.path().join(["a", "b"][placed.location_index]).join(chunk));
        placed_in.push(placed.location_index);
        check_all(&spool);
    }
    assert_eq!(placed_in, [0, 0, 1, 1]);
    let stats = spool.stats();
    assert_eq!(stats.locations[0].used_bytes, 800);
    assert_eq!(stats.locations[0].chunks_written, 2);
    assert_eq!(stats.locations[1].used_bytes, 800);
    assert_eq!(stats.locations[1].bytes_written, 800);
    assert_eq!(stats.over_quota_chunks, 0);
    assert_eq!(fs::read(root.path().join("a/c2/intervals.tsv")).unwrap(), &data[..300]);
    let manifest = fs::read_to_string(root.path().join("a/manifest.tsv")).unwrap();
    let lines: Vec<&str> = manifest.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[3].starts_with("c2\tintervals.tsv\t300\t300.000000000\t600.000000000\t"), "{}", lines[3]);
}

#[test]
fn moving_complete_files_away_frees_quota() {
    let root = tempfile::tempdir().unwrap();
    let mut spool =
        Spool::open(vec![location(root.path(), "a", Some(1000)), location(root.path(), "b", None)]).unwrap();
    let data = bytes(500);
    assert_eq!(spool.write_chunk("c1", 0, 1, &[("f", &data)]).unwrap().location_index, 0);
    assert_eq!(spool.write_chunk("c2", 1, 2, &[("f", &data)]).unwrap().location_index, 0);
    assert_eq!(spool.write_chunk("c3", 2, 3, &[("f", &data)]).unwrap().location_index, 1);
    // The operator moves the oldest complete chunk off the location.
    fs::rename(root.path().join("a/c1"), root.path().join("archived-c1")).unwrap();
    let placed = spool.write_chunk("c4", 3, 4, &[("f", &data)]).unwrap();
    assert_eq!(placed.location_index, 0);
    assert_eq!(spool.stats().locations[0].used_bytes, 1000);
    // The moved chunk has left the manifest rewritten with c4.
    let manifest = fs::read_to_string(root.path().join("a/manifest.tsv")).unwrap();
    assert!(!manifest.contains("c1\t") && manifest.contains("c2\t") && manifest.contains("c4\t"), "{manifest}");
    check_all(&spool);
    // One file of a chunk removed frees only its bytes.
    fs::remove_file(root.path().join("a/c2/f")).unwrap();
    assert_eq!(spool.write_chunk("c5", 4, 5, &[("f", &data[..400])]).unwrap().location_index, 0);
    assert_eq!(spool.write_chunk("c6", 5, 6, &[("f", &data[..200])]).unwrap().location_index, 1);
    assert_eq!(spool.stats().locations[0].used_bytes, 900);
}

#[test]
fn all_full_writes_over_quota_where_most_room_is_left() {
    let root = tempfile::tempdir().unwrap();
    let mut spool =
        Spool::open(vec![location(root.path(), "a", Some(1000)), location(root.path(), "b", Some(500))]).unwrap();
    assert_eq!(spool.write_chunk("c1", 0, 1, &[("f", &bytes(800))]).unwrap().location_index, 0);
    // Neither fits 600 bytes; b has 500 left, a 200.
    let placed = spool.write_chunk("c2", 1, 2, &[("f", &bytes(600))]).unwrap();
    assert_eq!((placed.location_index, placed.over_quota), (1, true));
    assert_eq!(fs::read(root.path().join("b/c2/f")).unwrap(), bytes(600));
    // Now a has the most room (200 against none).
    let placed = spool.write_chunk("c3", 2, 3, &[("f", &bytes(300))]).unwrap();
    assert_eq!((placed.location_index, placed.over_quota), (0, true));
    // Both past their quota: no room anywhere, the first is taken.
    let placed = spool.write_chunk("c4", 3, 4, &[("f", &[])]).unwrap();
    assert_eq!((placed.location_index, placed.over_quota), (0, true));
    // Once room is made, chunks fit again, without the flag.
    fs::remove_dir_all(root.path().join("b/c2")).unwrap();
    let placed = spool.write_chunk("c5", 4, 5, &[("f", &bytes(500))]).unwrap();
    assert_eq!((placed.location_index, placed.over_quota), (1, false));
    let stats = spool.stats();
    assert_eq!(stats.over_quota_chunks, 3);
    assert_eq!((stats.locations[0].used_bytes, stats.locations[1].used_bytes), (1100, 500));
    check_all(&spool);
}

#[test]
fn restart_keeps_counting_listed_files() {
    let root = tempfile::tempdir().unwrap();
    let locations = vec![location(root.path(), "a", Some(1000)), location(root.path(), "b", None)];
    let mut spool = Spool::open(locations.clone()).unwrap();
    spool.write_chunk("c1", 0, 10, &[("f", &bytes(700)), ("g", &bytes(100))]).unwrap();
    drop(spool);

    let mut spool = Spool::open(locations.clone()).unwrap();
    assert!(spool.leftovers().is_empty());
    let stats = spool.stats();
    assert_eq!((stats.locations[0].used_bytes, stats.locations[0].chunks_written), (800, 0));
    assert!(matches!(spool.write_chunk("c1", 10, 20, &[("f", b"x")]), Err(SpoolError::ChunkExists { .. })));
    assert_eq!(spool.write_chunk("c2", 10, 20, &[("f", &bytes(300))]).unwrap().location_index, 1);
    assert_eq!(spool.write_chunk("c3", 20, 30, &[("f", &bytes(200))]).unwrap().location_index, 0);
    drop(spool);

    let spool = Spool::open(locations).unwrap();
    let used: Vec<u64> = spool.stats().locations.iter().map(|l| l.used_bytes).collect();
    assert_eq!(used, [1000, 300]);
    let manifest = fs::read_to_string(root.path().join("a/manifest.tsv")).unwrap();
    assert_eq!(manifest.lines().filter(|l| l.starts_with("c1\t")).count(), 2, "{manifest}");
    check_all(&spool);
}

#[test]
fn open_reports_what_an_interrupted_chunk_left() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    let locations = vec![location(root.path(), "a", Some(10_000))];
    Spool::open(locations.clone()).unwrap().write_chunk("c1", 0, 1, &[("f", &bytes(10))]).unwrap();
    // Stopped while writing c2's second file (the first was renamed, not yet listed) …
    fs::create_dir(a.join("c2")).unwrap();
    fs::write(a.join("c2/intervals.tsv"), bytes(40)).unwrap();
    fs::write(a.join("c2/tcp_flows.tsv.part"), bytes(30)).unwrap();
    // … or while writing c3's first file, or the manifest.
    fs::create_dir(a.join("c3")).unwrap();
    fs::write(a.join("c3/intervals.tsv.part"), bytes(20)).unwrap();
    fs::write(a.join("manifest.tsv.tmp"), "chunk\tfi").unwrap();

    let mut spool = Spool::open(locations).unwrap();
    let report: Vec<(PathBuf, u64, bool)> = spool
        .leftovers()
        .iter()
        .map(|l| (l.path.strip_prefix(&a).unwrap().to_path_buf(), l.bytes, l.removed))
        .collect();
    assert_eq!(
        report,
        [
            ("manifest.tsv.tmp".into(), 8, true),
            ("c2/intervals.tsv".into(), 40, false),
            ("c2/tcp_flows.tsv.part".into(), 30, true),
            ("c3/intervals.tsv.part".into(), 20, true),
        ]
    );
    // The whole file stays (never delete complete data) but is not counted; c3 is gone.
    assert_eq!(fs::read(a.join("c2/intervals.tsv")).unwrap(), bytes(40));
    assert!(
        !a.join("c2/tcp_flows.tsv.part").exists() && !a.join("c3").exists() && !a.join("manifest.tsv.tmp").exists()
    );
    assert_eq!(spool.stats().locations[0].used_bytes, 10);
    // c3 can be written again; c2 is refused, its directory holds data.
    spool.write_chunk("c3", 1, 2, &[("intervals.tsv", &bytes(5))]).unwrap();
    assert!(matches!(spool.write_chunk("c2", 1, 2, &[("x", b"")]), Err(SpoolError::ChunkExists { .. })));
}

#[test]
fn open_fails_on_a_location_that_cannot_be_a_directory() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("file"), b"").unwrap();
    // Fails for root too: a directory cannot be made under a regular file.
    let result = Spool::open(vec![location(root.path(), "a", None), location(root.path(), "file/b", None)]);
    match result {
        Err(SpoolError::Location { path, .. }) => assert_eq!(path, root.path().join("file/b")),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let e = Spool::open(vec![location(root.path(), "file", None)]).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains(&root.path().join("file").display().to_string()), "{e}");
}

#[test]
fn a_location_that_fails_sends_the_chunk_to_the_next() {
    let root = tempfile::tempdir().unwrap();
    let mut spool =
        Spool::open(vec![location(root.path(), "a", Some(1000)), location(root.path(), "b", Some(1000))]).unwrap();
    spool.write_chunk("c1", 0, 1, &[("f", &bytes(100))]).unwrap();
    // Location a becomes unusable while running (as a full or read-only disk would; a regular
    // file in the directory's place fails for root too).
    fs::rename(root.path().join("a"), root.path().join("a-gone")).unwrap();
    fs::write(root.path().join("a"), b"").unwrap();
    let placed = spool.write_chunk("c2", 1, 2, &[("f", &bytes(100)), ("g", &bytes(50))]).unwrap();
    assert_eq!((placed.location_index, placed.over_quota), (1, false));
    assert_eq!(placed.failed.len(), 1);
    assert_eq!(placed.failed[0].location, root.path().join("a"));
    assert_eq!(fs::read(root.path().join("b/c2/g")).unwrap(), bytes(50));
    let stats = spool.stats();
    assert_eq!((stats.locations[0].failed_attempts, stats.locations[1].chunks_written), (1, 1));
    check_location(&root.path().join("b"));
}

#[test]
fn a_failed_manifest_write_takes_back_the_chunk() {
    let root = tempfile::tempdir().unwrap();
    let mut spool = Spool::open(vec![location(root.path(), "a", None), location(root.path(), "b", None)]).unwrap();
    spool.write_chunk("c1", 0, 1, &[("f", &bytes(10))]).unwrap();
    // The manifest's temporary file cannot be created: the files were renamed already.
    fs::create_dir(root.path().join("a/manifest.tsv.tmp")).unwrap();
    let placed = spool.write_chunk("c2", 1, 2, &[("f", &bytes(10)), ("g", &bytes(20))]).unwrap();
    assert_eq!(placed.location_index, 1);
    assert_eq!(placed.failed[0].action, "writing the manifest");
    assert!(!root.path().join("a/c2").exists());
    assert_eq!(spool.stats().locations[0].used_bytes, 10);
    fs::remove_dir(root.path().join("a/manifest.tsv.tmp")).unwrap();
    check_all(&spool);
    // a recovers: its manifest lists c1 and the next chunk, not c2.
    spool.write_chunk("c3", 2, 3, &[("f", &bytes(1))]).unwrap();
    let manifest = fs::read_to_string(root.path().join("a/manifest.tsv")).unwrap();
    assert_eq!(manifest.lines().map(|l| l.split('\t').next().unwrap()).collect::<Vec<_>>(), ["chunk", "c1", "c3"]);
}

#[test]
fn when_every_location_fails_nothing_is_left_and_each_failure_is_named() {
    let root = tempfile::tempdir().unwrap();
    let mut spool = Spool::open(vec![location(root.path(), "a", None), location(root.path(), "b", None)]).unwrap();
    // 251 bytes is a valid name, but its `.part` name passes the usual 255-byte limit: the
    // second file fails after the first is complete.
    let long = "x".repeat(251);
    let result = spool.write_chunk("c1", 0, 1, &[("first", b"whole"), (&long, b"never")]);
    let Err(SpoolError::AllFailed { chunk, failures }) = result else { panic!("{:?}", result.map(|_| ())) };
    assert_eq!(chunk, "c1");
    let failed_at: Vec<&Path> = failures.iter().map(|f| f.location.as_path()).collect();
    assert_eq!(failed_at, [root.path().join("a"), root.path().join("b")]);
    for dir in ["a", "b"] {
        assert_eq!(fs::read_dir(root.path().join(dir)).unwrap().count(), 0, "{dir} not empty");
    }
    let message = SpoolError::AllFailed { chunk, failures }.to_string();
    assert!(message.contains("/a: writing") && message.contains("/b: writing"), "{message}");
    // The spool goes on.
    assert_eq!(spool.write_chunk("c1", 0, 1, &[("first", b"whole")]).unwrap().location_index, 0);
}

#[test]
fn bad_requests_are_refused_before_anything_is_written() {
    let root = tempfile::tempdir().unwrap();
    let mut spool = Spool::open(vec![location(root.path(), "a", None)]).unwrap();
    let f: &[(&str, &[u8])] = &[("f", b"1")];
    for chunk in ["", ".", "..", "a/b", "c\t1", "c.part", "manifest.tsv"] {
        assert!(matches!(spool.write_chunk(chunk, 0, 1, f), Err(SpoolError::InvalidName { .. })), "{chunk:?}");
    }
    let twice: &[(&str, &[u8])] = &[("f", b"1"), ("f", b"2")];
    assert!(matches!(spool.write_chunk("c", 0, 1, twice), Err(SpoolError::InvalidName { .. })));
    assert!(matches!(spool.write_chunk("c", 0, 1, &[("x.part", b"")]), Err(SpoolError::InvalidName { .. })));
    assert!(matches!(spool.write_chunk("c", 0, 1, &[]), Err(SpoolError::EmptyChunk { .. })));
    assert!(matches!(spool.write_chunk("c", 2, 1, f), Err(SpoolError::BadSpan { first_ns: 2, end_ns: 1 })));
    assert_eq!(fs::read_dir(root.path().join("a")).unwrap().count(), 0);
    assert!(matches!(Spool::open(vec![]), Err(SpoolError::NoLocations)));
    for overlapping in ["a/../a", "a/inner"] {
        let locations = vec![location(root.path(), "a", None), location(root.path(), overlapping, Some(5))];
        let e = Spool::open(locations).map(|_| ()).unwrap_err();
        assert!(matches!(e, SpoolError::OverlappingLocations { .. }), "{e}");
    }
    let outer_second = vec![location(root.path(), "a/inner", None), location(root.path(), "a", None)];
    assert!(matches!(Spool::open(outer_second), Err(SpoolError::OverlappingLocations { .. })));
    assert!(Spool::open(vec![location(root.path(), "a", None), location(root.path(), "ab", None)]).is_ok());
}

#[test]
fn a_damaged_manifest_is_refused_with_its_line() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    fs::create_dir(&a).unwrap();
    fs::write(a.join("manifest.tsv"), format!("{MANIFEST_HEADER}\nc1\tf\t10\t0.000000000\t1.0\t5\n")).unwrap();
    match Spool::open(vec![location(root.path(), "a", None)]).map(|_| ()) {
        Err(e @ SpoolError::Manifest { line: 2, .. }) => assert!(e.to_string().contains("end_ts"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// Many chunks of varied sizes over three locations, with chunks moved away now and then: each
/// placement is the one the rule gives, computed independently from what is on disk.
#[test]
fn placements_follow_the_rule_over_many_chunks() {
    let root = tempfile::tempdir().unwrap();
    let quotas = [Some(5_000u64), Some(3_000), Some(4_000)];
    let names = ["a", "b", "c"];
    let locations = names.iter().zip(quotas).map(|(n, q)| location(root.path(), n, q)).collect();
    let mut spool = Spool::open(locations).unwrap();
    let mut seed = 0x5eed_u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed >> 33
    };
    let mut over_quota = 0;
    for i in 0..200u64 {
        if next() % 4 != 0 {
            // Move away the oldest chunk of a random location.
            let dir = root.path().join(names[(next() % 3) as usize]);
            let mut chunks: Vec<PathBuf> =
                fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
            chunks.sort();
            if let Some(oldest) = chunks.first() {
                fs::remove_dir_all(oldest).unwrap();
            }
        }
        let size = (next() % 700) as usize;
        let used: Vec<u64> = names.iter().map(|n| check_location(&root.path().join(n))).collect();
        let fits = |j: usize| used[j] + size as u64 <= quotas[j].unwrap();
        let expected = (0..3)
            .find(|&j| fits(j))
            .unwrap_or_else(|| (0..3).rev().max_by_key(|&j| quotas[j].unwrap().saturating_sub(used[j])).unwrap());
        let files: [(&str, &[u8]); 2] = [("x", &bytes(size / 3)), ("y", &bytes(size - size / 3))];
        let placed = spool.write_chunk(&format!("c{i:04}"), i, i + 1, &files).unwrap();
        assert_eq!(placed.location_index, expected, "chunk {i}, {size} bytes, used {used:?}");
        assert_eq!(placed.over_quota, !fits(expected));
        over_quota += u64::from(placed.over_quota);
        let stats = spool.stats();
        assert_eq!(stats.locations[expected].used_bytes, used[expected] + size as u64);
    }
    assert_eq!(spool.stats().over_quota_chunks, over_quota);
    // Both kinds of placement were exercised (83 of 200 over quota with this seed).
    assert!(over_quota > 0 && over_quota < 100, "{over_quota}");
}

fn age_dir(dir: &Path) {
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    fs::File::open(dir).unwrap().set_modified(hour_ago).unwrap();
}

/// A chunk directory whose mtime has not moved is counted without stat'ing its files; removing
/// a file moves the mtime, and the chunk is counted again from its files.
#[test]
fn an_unchanged_chunk_directory_is_counted_once() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    let mut spool = Spool::open(vec![location(root.path(), "a", Some(1000))]).unwrap();
    spool.write_chunk("c1", 0, 1, &[("f", &bytes(300)), ("g", &bytes(200))]).unwrap();
    age_dir(&a.join("c1"));
    spool.write_chunk("c2", 1, 2, &[("f", &bytes(100))]).unwrap(); // stats c1's files
                                                                   // Changed in place, its directory untouched: the known blind spot, which shows the cache.
    fs::OpenOptions::new().write(true).open(a.join("c1/f")).unwrap().set_len(0).unwrap();
    spool.write_chunk("c3", 2, 3, &[("f", &bytes(10))]).unwrap();
    assert_eq!(spool.stats().locations[0].used_bytes, 610);
    fs::remove_file(a.join("c1/g")).unwrap();
    spool.write_chunk("c4", 3, 4, &[("f", &bytes(10))]).unwrap();
    assert_eq!(spool.stats().locations[0].used_bytes, 120);
    let manifest = fs::read_to_string(a.join("manifest.tsv")).unwrap();
    assert!(manifest.contains("c1\tf\t") && !manifest.contains("c1\tg\t"), "{manifest}");
}

#[test]
fn a_manifest_edited_by_hand_is_read_with_each_chunk_together() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    fs::create_dir_all(a.join("c1")).unwrap();
    fs::create_dir_all(a.join("c2")).unwrap();
    for (path, n) in [("c1/f", 10), ("c1/g", 20), ("c2/f", 40)] {
        fs::write(a.join(path), bytes(n)).unwrap();
    }
    let line = |chunk: &str, file: &str, n: u64| format!("{chunk}\t{file}\t{n}\t0.000000000\t1.000000000\t0\n");
    let manifest = format!("{MANIFEST_HEADER}\n{}{}{}", line("c1", "f", 10), line("c2", "f", 40), line("c1", "g", 20));
    fs::write(a.join("manifest.tsv"), manifest).unwrap();
    let mut spool = Spool::open(vec![location(root.path(), "a", None)]).unwrap();
    assert!(spool.leftovers().is_empty());
    assert_eq!(spool.stats().locations[0].used_bytes, 70);
    fs::remove_dir_all(a.join("c1")).unwrap();
    spool.write_chunk("c3", 1, 2, &[("f", &bytes(5))]).unwrap();
    assert_eq!(spool.stats().locations[0].used_bytes, 45);
    let manifest = fs::read_to_string(a.join("manifest.tsv")).unwrap();
    let chunks: Vec<&str> = manifest.lines().skip(1).map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(chunks, ["c2", "c3"]);
    check_location(&a);
}

/// Mounts a tmpfs of `size` on `dir` (root only); false, with a SKIPPED line, when it cannot.
fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    fs::create_dir_all(dir).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: cannot mount a tmpfs on {} (needs root)", dir.display());
    }
    ok
}

fn mount(args: &[&str], dir: &Path) {
    let status = std::process::Command::new(args[0]).args(&args[1..]).arg(dir).status().unwrap();
    assert!(status.success(), "{args:?} {}", dir.display());
}

/// Unmounts `dir` when dropped (a failed assertion must not leave a mount behind).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 20: a location whose directory is removed mid-run: its chunks go to the next one,
/// nothing is lost, and nothing is written where the directory was.
#[test]
fn a_location_removed_mid_run_sends_its_chunks_to_the_next() {
    let root = tempfile::tempdir().unwrap();
    let mut spool = Spool::open(vec![location(root.path(), "a", None), location(root.path(), "b", None)]).unwrap();
    spool.write_chunk("c1", 0, 1, &[("f", &bytes(10))]).unwrap();
    // The directory that will stand in its place, made while the first still exists: a
    // directory made after the removal may be given the freed inode, and then be the same
    // (device, inode) as the one opened.
    fs::create_dir(root.path().join("a-again")).unwrap();
    fs::remove_dir_all(root.path().join("a")).unwrap();
    let placed = spool.write_chunk("c2", 1, 2, &[("f", &bytes(20))]).unwrap();
    assert_eq!(placed.location_index, 1);
    assert_eq!(placed.failed[0].location, root.path().join("a"));
    // Made again by someone else: not the directory opened, so still not used.
    fs::rename(root.path().join("a-again"), root.path().join("a")).unwrap();
    let placed = spool.write_chunk("c3", 2, 3, &[("f", &bytes(30))]).unwrap();
    assert_eq!(placed.location_index, 1);
    assert!(placed.failed[0].to_string().contains("unmounted or replaced"), "{}", placed.failed[0]);
    assert_eq!(fs::read_dir(root.path().join("a")).unwrap().count(), 0);
    assert_eq!(fs::read(root.path().join("b/c3/f")).unwrap(), bytes(30));
    check_location(&root.path().join("b"));
}

/// Issue 20: a location that turns read-only mid-run (root: a tmpfs remounted `ro`) sends its
/// chunks to the next, leaves nothing half-written, and takes chunks again once writable.
#[test]
fn a_location_turned_read_only_sends_its_chunks_to_the_next() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    if !mount_tmpfs(&a, "1m") {
        return;
    }
    let _mounted = Mounted(a.clone());
    let mut spool = Spool::open(vec![location(root.path(), "a", None), location(root.path(), "b", None)]).unwrap();
    spool.write_chunk("c1", 0, 1, &[("f", &bytes(10))]).unwrap();
    mount(&["mount", "-o", "remount,ro"], &a);
    let placed = spool.write_chunk("c2", 1, 2, &[("f", &bytes(20)), ("g", &bytes(5))]).unwrap();
    assert_eq!(placed.location_index, 1);
    assert!(placed.failed[0].to_string().contains("Read-only file system"), "{}", placed.failed[0]);
    mount(&["mount", "-o", "remount,rw"], &a);
    check_all(&spool);
    assert_eq!(spool.write_chunk("c3", 2, 3, &[("f", &bytes(30))]).unwrap().location_index, 0);
    check_all(&spool);
    let manifest = fs::read_to_string(a.join("manifest.tsv")).unwrap();
    assert_eq!(manifest.lines().map(|l| l.split('\t').next().unwrap()).collect::<Vec<_>>(), ["chunk", "c1", "c3"]);
}

/// Issue 20: a location on a file system that is unmounted mid-run: the empty mount point is
/// not the directory opened, so nothing goes there (it would fill the disk underneath); the
/// chunks go to the next location.
#[test]
fn an_unmounted_location_takes_no_chunk() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    if !mount_tmpfs(&a, "1m") {
        return;
    }
    let mounted = Mounted(a.clone());
    let mut spool = Spool::open(vec![location(root.path(), "a", None), location(root.path(), "b", None)]).unwrap();
    spool.write_chunk("c1", 0, 1, &[("f", &bytes(10))]).unwrap();
    drop(mounted);
    assert!(a.is_dir() && fs::read_dir(&a).unwrap().count() == 0, "the mount point is left");
    let placed = spool.write_chunk("c2", 1, 2, &[("f", &bytes(20))]).unwrap();
    assert_eq!(placed.location_index, 1);
    assert_eq!(fs::read_dir(&a).unwrap().count(), 0, "written on the disk under the mount point");
    check_location(&root.path().join("b"));
}

/// A location fills up mid-chunk (a tmpfs smaller than the chunk): the attempt leaves nothing
/// there, and the chunk is whole in the next location.
#[test]
fn a_location_that_fills_up_mid_chunk_leaves_nothing_there() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    if !mount_tmpfs(&a, "64k") {
        return;
    }
    let _mounted = Mounted(a.clone());
    let mut spool = Spool::open(vec![location(root.path(), "a", None), location(root.path(), "b", None)]).unwrap();
    let placed = spool.write_chunk("c1", 0, 1, &[("f", &bytes(40_000)), ("g", &bytes(40_000))]).unwrap();
    assert_eq!(placed.location_index, 1);
    assert!(placed.failed[0].to_string().contains("No space left"), "{}", placed.failed[0]);
    assert_eq!(fs::read_dir(&a).unwrap().count(), 0);
    assert_eq!(fs::read(root.path().join("b/c1/g")).unwrap(), bytes(40_000));
    check_all(&spool);
}
