//! Reads every capture listed in the shared trace corpus (`INDEX.tsv`) and checks the frame
//! count and format against the index (counts as Wireshark's capinfos gives them; for damaged
//! files, the records readable before the damage).
//!
//! The corpus is found at `$SONDE_TRACES`, else `<repo>/../shared/traces`; without it the test
//! passes with a note. Trace files are read in place, never copied.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sonde_capture::{open, open_reader, CaptureErrorKind, PacketSource};

/// Files whose count legitimately differs from the index: (file, frames sonde reads, reason).
/// The count is pinned so a change in behaviour shows up.
const EXCEPTIONS: &[(&str, u64, &str)] = &[(
    "robustness/the-tcpdump-group+libpcap/tests/shb-option-too-long.pcapng",
    0,
    // The SHB says 52 bytes but its trailing length field holds option bytes ("0000"): pcapng
    // §3.1 makes that a corrupt block, so sonde stops at byte 0 (libpcap rejects the file too).
    // The index's 1 comes from a reader that ignores the trailing length.
    "SHB trailing block length mismatch: Corrupt at byte 0",
)];

fn traces_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("SONDE_TRACES") {
        Some(d) => PathBuf::from(d),
        // crates/sonde-capture → repo → ../shared/traces
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    };
    dir.join("INDEX.tsv").is_file().then_some(dir)
}

struct Row {
    file: String,
    packets: Option<u64>,
    format: String,
    variant: String,
}

fn index(dir: &std::path::Path) -> Vec<Row> {
    let text = std::fs::read_to_string(dir.join("INDEX.tsv")).expect("read INDEX.tsv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("INDEX header").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect("INDEX column");
    let (c_file, c_packets, c_format, c_variant) = (col("file"), col("packets"), col("format"), col("format_variant"));
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let get = |c: usize| f.get(c).copied().unwrap_or("").to_string();
            Row {
                file: get(c_file),
                packets: get(c_packets).parse().ok(),
                format: get(c_format),
                variant: get(c_variant),
            }
        })
        .collect()
}

/// The name `format()` should give for an index row: "pcap" + "be-usec v2.1" → "pcap-be-usec",
/// "le-modified(kuznetsov)" → "pcap-le-modified"; ERF and snoop have no variant.
fn expected_format(format: &str, variant: &str) -> String {
    let v = variant.split([' ', '(']).next().unwrap_or("");
    if v.is_empty() {
        format.to_string()
    } else {
        format!("{format}-{v}")
    }
}

/// Outcome of reading one file to its end.
struct Read {
    frames: u64,
    format: String,
    per_link: BTreeMap<u32, u64>,
    error: Option<String>,
    /// FNV-1a over every frame's fields and bytes, to compare the mapped and streamed paths.
    digest: u64,
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn read_all(src: &mut dyn PacketSource) -> Read {
    let mut frames = 0;
    let mut per_link = BTreeMap::new();
    let mut error = None;
    let mut last_pos = 0;
    let mut digest = 0xcbf2_9ce4_8422_2325;
    loop {
        match src.next_frame() {
            Ok(Some(f)) => {
                frames += 1;
                digest = fnv(digest, &f.ts_ns.to_le_bytes());
                digest = fnv(digest, &f.wire_len.to_le_bytes());
                digest = fnv(digest, &f.link_type.to_le_bytes());
                digest = fnv(digest, f.data);
                *per_link.entry(f.link_type).or_insert(0) += 1;
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                // After an error the source ends.
                assert!(matches!(src.next_frame(), Ok(None)));
                break;
            }
        }
        let pos = src.position();
        assert!(pos >= last_pos, "position went backwards");
        last_pos = pos;
    }
    Read { frames, format: src.format().to_string(), per_link, error, digest }
}

#[test]
fn every_indexed_trace() {
    let Some(dir) = traces_dir() else {
        eprintln!("note: trace corpus not found (set SONDE_TRACES); skipping");
        return;
    };
    let rows = index(&dir);
    let (mut matched, mut excepted, mut failures) = (0, 0, Vec::new());
    for row in &rows {
        let path = dir.join(&row.file);
        let exception = EXCEPTIONS.iter().find(|(f, _, _)| *f == row.file);
        let got = match open(&path) {
            Ok(mut src) => read_all(src.as_mut()),
            Err(e) => {
                if let Some((_, 0, _)) = exception {
                    excepted += 1;
                    continue;
                }
                let empty_ok = matches!(e.kind, CaptureErrorKind::Empty) && row.packets == Some(0);
                if !empty_ok {
                    failures.push(format!("{}: open failed: {e}", row.file));
                }
                continue;
            }
        };
        // The streamed path (pipe, decompressor) must see exactly what the mapped path saw.
        let file = std::fs::File::open(&path).expect("reopen");
        match open_reader(file) {
            Ok(mut src) => {
                let streamed = read_all(src.as_mut());
                if (streamed.frames, streamed.digest, &streamed.error) != (got.frames, got.digest, &got.error) {
                    failures.push(format!("{}: streamed read differs from mapped read", row.file));
                }
            }
            Err(e) => failures.push(format!("{}: stream open failed: {e}", row.file)),
        }
        if let Some((_, frames, why)) = exception {
            assert_eq!(got.frames, *frames, "{}: exception ({why}) no longer holds", row.file);
            excepted += 1;
            continue;
        }
        let fmt_ok = got.format == expected_format(&row.format, &row.variant);
        if !fmt_ok {
            failures.push(format!("{}: format {} vs index {} {}", row.file, got.format, row.format, row.variant));
        }
        match row.packets {
            Some(p) if p != got.frames => {
                failures.push(format!("{}: {} frames, index says {p} (error: {:?})", row.file, got.frames, got.error))
            }
            _ => matched += 1,
        }
    }
    eprintln!("{matched} of {} indexed traces matched, {excepted} listed exceptions", rows.len());
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Frames per link type of multi-interface pcapng files, as tshark reports them.
#[test]
fn multi_interface_link_types() {
    let Some(dir) = traces_dir() else {
        eprintln!("note: trace corpus not found (set SONDE_TRACES); skipping");
        return;
    };
    let cases: &[(&str, &[(u32, u64)])] = &[
        ("robustness/seladb+PcapPlusPlus/Tests/Pcap++Test/PcapExamples/many_interfaces-1.pcapng", &[(0, 2), (1, 62)]),
        ("robustness/seladb+PcapPlusPlus/Tests/Pcap++Test/PcapExamples/pcapng-example.pcapng", &[(1, 59), (113, 100)]),
        ("robustness/google+gopacket/pcapgo/tests/be/test202.pcapng", &[(0, 2), (1, 6)]),
        ("robustness/google+gopacket/pcapgo/tests/le/test202.pcapng", &[(0, 2), (1, 6)]),
        ("robustness/LibtraceTeam+libtrace/test/traces/complex.pcapng", &[(0, 1), (1, 4)]),
    ];
    for (file, want) in cases {
        let path = dir.join(file);
        if !path.is_file() {
            eprintln!("note: {file} missing; skipped");
            continue;
        }
        let mut src = open(&path).expect("open");
        let got = read_all(src.as_mut());
        assert!(got.error.is_none(), "{file}: {:?}", got.error);
        let want: BTreeMap<u32, u64> = want.iter().copied().collect();
        assert_eq!(got.per_link, want, "{file}");
    }
}

/// A sample of the corpus, compressed in memory (gzip, zstd, xz), reads exactly as the plain file.
#[test]
fn compressed_corpus_sample() {
    use std::io::Write;
    let Some(dir) = traces_dir() else {
        eprintln!("note: trace corpus not found (set SONDE_TRACES); skipping");
        return;
    };
    for row in index(&dir).iter().step_by(40) {
        let path = dir.join(&row.file);
        let Ok(mut src) = open(&path) else { continue };
        let plain = read_all(src.as_mut());
        let bytes = std::fs::read(&path).expect("read trace");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let zst = zstd::encode_all(&bytes[..], 1).expect("zstd");
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 0);
        xz.write_all(&bytes).expect("xz");
        let xz = xz.finish().expect("xz");
        for packed in [gz, zst, xz] {
            let mut src = sonde_capture::open_bytes(packed).expect("open compressed");
            let got = read_all(src.as_mut());
            assert_eq!((got.frames, got.digest), (plain.frames, plain.digest), "{}", row.file);
            assert_eq!(got.format, plain.format);
        }
    }
}
