//! `sonde anon -r IN -w OUT` on real traces: tshark finds every checksum valid (but for ICMP
//! quotes it cannot check, flagged in the input too), only address and checksum bytes change
//! (their positions as tshark dissects them), the flow logs of the anonymised trace equal
//! `analyze --anonymize cryptopan` of the input under the same key, and the same key gives the
//! same bytes. Traces from ../shared are skipped when absent; tshark checks when it is absent.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

/// Traces covering what the rewriting handles: the ground truth, the demo, and traces with ARP,
/// ICMP errors, GRE/ERSPAN, VXLAN, GTP-U, 6in4, two VLAN tags, Linux SLL, IPv4/IPv6 fragments,
/// PPPoE and MPLS.
const SHARED_TRACES: [&str; 14] = [
    "groundtruth/ipv6.pcap",
    "groundtruth/mixed.pcap",
    "traces/realistic/CESNET+ipfixprobe/tests/functional/inputs/arp.pcap",
    "traces/realistic/CESNET+ipfixprobe/tests/functional/inputs/smtp.pcap",
    "traces/robustness/seladb+PcapPlusPlus/Tests/Packet++Test/PacketExamples/GrePackets.pcap",
    "traces/realistic/arkime+arkime/tests/pcap/gre-erspan-vxlan.pcap",
    "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/vxlan.pcap",
    "traces/robustness/seladb+PcapPlusPlus/Tests/Packet++Test/PacketExamples/gtp.pcap",
    "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/6in4tunnel.pcap",
    "traces/realistic/arkime+arkime/tests/pcap/twovlan.pcap",
    "traces/realistic/irontec+sngrep/tests/ipv6frag.pcap",
    "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/dns_fragmented.pcap",
    "traces/realistic/arkime+arkime/tests/pcap/pppoe.pcap",
    "traces/realistic/arkime+arkime/tests/pcap/mpls-basic.pcap",
];

const TSHARK_PREFS: [&str; 6] =
    ["-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"];
/// Wireshark's checksum status 0 is "bad" (1 good, 2 unverified).
const BAD_CHECKSUM: &str = "ip.checksum.status == 0 || tcp.checksum.status == 0 || udp.checksum.status == 0 \
     || icmp.checksum.status == 0 || icmpv6.checksum.status == 0 || gre.checksum.status == 0";
/// The fields whose bytes `sonde anon` may change.
const REWRITTEN_FIELDS: [&str; 18] = [
    "ip.src",
    "ip.dst",
    "ip.checksum",
    "ipv6.src",
    "ipv6.dst",
    "tcp.checksum",
    "udp.checksum",
    "icmp.checksum",
    "icmpv6.checksum",
    "gre.checksum",
    "arp.src.proto_ipv4",
    "arp.dst.proto_ipv4",
    "icmp.redir_gw",
    "icmpv6.nd.ns.target_address",
    "icmpv6.nd.na.target_address",
    "icmpv6.nd.rd.target_address",
    "ipv6.routing.mipv6.home_address",
    "ipv6.routing.srh.addr",
];

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

fn traces() -> Vec<PathBuf> {
    let mut traces = vec![demo()];
    if let Some(shared) = shared_dir() {
        traces.extend(SHARED_TRACES.iter().map(|rel| shared.join(rel)).filter(|p| {
            let found = p.exists();
            if !found {
                eprintln!("SKIPPED: {} (absent)", p.display());
            }
            found
        }));
    }
    traces
}

fn tshark_present() -> bool {
    let found = Command::new("tshark").arg("-v").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: tshark checks (tshark not installed: make deps)");
    }
    found
}

fn anon(input: &Path, output: &Path, extra: &[&str]) -> Output {
    sonde().arg("anon").arg("-q").arg("-r").arg(input).arg("-w").arg(output).args(extra).output().expect("run sonde")
}

fn anon_ok(input: &Path, output: &Path, extra: &[&str]) {
    let out = anon(input, output, extra);
    assert!(out.status.success(), "{}: {}", input.display(), String::from_utf8_lossy(&out.stderr));
}

type Record = (u64, u32, u32, Vec<u8>);

fn frames(path: &Path) -> Vec<Record> {
    let mut source = sonde_capture::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    while let Some(f) = source.next_frame().unwrap() {
        out.push((f.ts_ns, f.wire_len, f.link_type, f.data.to_vec()));
    }
    out
}

/// Frames tshark finds a bad checksum in, with whether each is an ICMP or ICMPv6 error.
fn bad_checksums(path: &Path) -> BTreeSet<(u64, bool)> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(TSHARK_PREFS)
        .args(["-Y", BAD_CHECKSUM, "-T", "fields", "-e", "frame.number", "-e", "icmp.type", "-e", "icmpv6.type"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let first_type = |i: usize| f.get(i).and_then(|t| t.split(',').next()?.parse::<u8>().ok());
            let error = matches!(first_type(1), Some(3 | 4 | 5 | 11 | 12)) || matches!(first_type(2), Some(1..=4));
            (f[0].parse().unwrap(), error)
        })
        .collect()
}

/// For each of the first `count` frames, the byte positions of the fields `sonde anon` may
/// change, as tshark dissects the frame (PDML).
fn rewritable_bytes(path: &Path, count: usize) -> Vec<BTreeSet<usize>> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        // Without reassembly, a first fragment's transport header is dissected in its own frame.
        .args(["-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE"])
        .args(["-c", &count.to_string(), "-T", "pdml"])
        .output()
        .expect("run tshark");
    let mut frames = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim_start();
        if line.starts_with("<packet>") {
            frames.push(BTreeSet::new());
        }
        let Some(rest) = line.strip_prefix("<field name=\"") else { continue };
        let name = &rest[..rest.find('"').unwrap_or(0)];
        if !REWRITTEN_FIELDS.contains(&name) {
            continue;
        }
        let attr = |key: &str| -> Option<usize> {
            let at = line.find(&format!(" {key}=\""))? + key.len() + 3;
            line[at..].split('"').next()?.parse().ok()
        };
        if let (Some(pos), Some(size), Some(set)) = (attr("pos"), attr("size"), frames.last_mut()) {
            set.extend(pos..pos + size);
        }
    }
    frames
}

#[test]
fn anonymised_traces_are_valid_and_change_only_addresses_and_checksums() {
    let tshark = tshark_present();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("site.key");
    for trace in traces() {
        let name = trace.display().to_string();
        let out = dir.path().join("anon.pcap");
        anon_ok(&trace, &out, &["--key", key.to_str().unwrap(), "--force"]);

        // Same frames, times, lengths and link types; some addresses changed.
        let (before, after) = (frames(&trace), frames(&out));
        assert_eq!(before.len(), after.len(), "{name}: frame count");
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            assert_eq!((b.0 / 1000, b.1, b.2, b.3.len()), (a.0 / 1000, a.1, a.2, a.3.len()), "{name}: frame {}", i + 1);
        }
        assert!(before.iter().zip(&after).any(|(b, a)| b.3 != a.3), "{name}: nothing rewritten");

        // The same key gives the same bytes.
        let again = dir.path().join("again.pcap");
        anon_ok(&trace, &again, &["--key", key.to_str().unwrap(), "--force"]);
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap(), "{name}: not deterministic");

        // Flow logs: the anonymised trace analysed plainly equals the input analysed with
        // --anonymize under the same key, row for row, but for *_iscrypto: only the second run
        // anonymised the addresses it shows.
        let (plain, o1) = analyze(&out, &["--interval", "0"]);
        let (mapped, o2) =
            analyze(&trace, &["--interval", "0", "--anonymize", "cryptopan", "--key", key.to_str().unwrap()]);
        assert!(o1.status.success() && o2.status.success(), "{name}: analyze failed");
        for log in ["tcp_flows.tsv", "udp_flows.tsv"] {
            let mut a = common::read_tsv(&plain.path().join(log));
            for row in &mut a {
                for column in ["c_iscrypto", "s_iscrypto"] {
                    let value = row.get_mut(column).expect("iscrypto column");
                    assert_eq!(value, "0", "{name}: {log}: a plain run marks nothing anonymised");
                    *value = "1".to_string();
                }
            }
            let mut b = common::read_tsv(&mapped.path().join(log));
            // `sonde anon` rewrites headers, not payloads: in the rewritten trace DN-Hunter
            // cannot pair an answer with the (rewritten) server, and names that are address
            // literals (a Host of 10.0.0.1, a PTR query) stay plain, which --anonymize maps.
            for row in a.iter_mut().chain(b.iter_mut()) {
                for column in ["fqdn", "dns_rslv", "dns_answers", "dns_qry", "http_hostname", "c_tls_SNI", "quic_SNI"] {
                    row.remove(column);
                }
            }
            assert!(a == b, "{name}: {log} of the anonymised trace differs from analyze --anonymize");
        }

        if !tshark {
            continue;
        }
        // Every checksum tshark can check is valid; what it still flags are quotes of ICMP
        // errors it cannot check (cut quotes), flagged in the input as well.
        let (bad_before, bad_after) = (bad_checksums(&trace), bad_checksums(&out));
        for bad in &bad_after {
            assert!(bad.1 && bad_before.contains(bad), "{name}: frame {} has a bad checksum", bad.0);
        }
        // Only the bytes of address and checksum fields changed.
        const PDML_FRAMES: usize = 400;
        for (i, allowed) in rewritable_bytes(&out, PDML_FRAMES).iter().enumerate() {
            let (b, a) = (&before[i].3, &after[i].3);
            let changed: Vec<usize> = (0..b.len()).filter(|&j| b[j] != a[j] && !allowed.contains(&j)).collect();
            assert!(
                changed.is_empty(),
                "{name}: frame {} changed outside addresses and checksums at {changed:?}",
                i + 1
            );
        }
    }
}

/// The checks above would see a wrong checksum: one byte of a TCP checksum changed in an
/// anonymised trace is reported.
#[test]
fn a_broken_checksum_is_detected() {
    if !tshark_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("anon.pcap");
    anon_ok(&demo(), &out, &["--anonymize", "zero"]);
    let mut records = frames(&out);
    // The first IPv4 TCP frame over Ethernet: its checksum is at 14 + 20 + 16.
    let i = records
        .iter()
        .position(|r| r.3.len() > 54 && r.3[12..14] == [8, 0] && r.3[14] == 0x45 && r.3[23] == 6)
        .expect("an IPv4 TCP frame");
    records[i].3[50] ^= 0x01;
    let broken = dir.path().join("broken.pcap");
    let mut w = sonde_capture::TraceWriter::new(
        std::fs::File::create(&broken).unwrap(),
        sonde_capture::TraceFormat::Pcap { nanos: false },
    );
    for (ts, wire, link, data) in &records {
        w.write(*ts, *wire, *link, data).unwrap();
    }
    w.finish().unwrap();
    assert_eq!(bad_checksums(&broken).into_iter().collect::<Vec<_>>(), vec![(i as u64 + 1, false)]);
}

#[test]
fn snaplen_cuts_frames_and_keeps_their_wire_length() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cut.pcap");
    // Enough for every header of the demo trace (IPv6 and TCP with options), less than its
    // data frames.
    let snaplen = 128;
    anon_ok(&demo(), &out, &["--anonymize", "zero", "--snaplen", &snaplen.to_string()]);
    let (before, after) = (frames(&demo()), frames(&out));
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((a.1, a.3.len()), (b.1, b.3.len().min(snaplen)));
    }
    assert!(before.iter().any(|b| b.3.len() > snaplen));
    // The flows are those of the whole frames.
    let (cut, _) = analyze(&out, &["--interval", "0"]);
    let (whole, _) = analyze(&demo(), &["--interval", "0", "--anonymize", "zero"]);
    let cols = |p: &Path| {
        let mut rows: Vec<_> =
            read_tsv(p).iter().map(|r| (tuple(r), r["c_pkts_all"].clone(), r["s_bytes_uniq"].clone())).collect();
        rows.sort();
        rows
    };
    assert_eq!(cols(&cut.path().join("tcp_flows.tsv")), cols(&whole.path().join("tcp_flows.tsv")));
}

#[test]
fn refuses_to_overwrite_without_force_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pcap");
    std::fs::write(&out, b"keep me").unwrap();
    let o = anon(&demo(), &out, &["--anonymize", "zero"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    // cryptopan (the default) or hash without a key: a usage error (issue 23), exit status 2
    // and the command's usage, before anything is written.
    let fresh = dir.path().join("fresh.pcap");
    for args in [&[][..], &["--anonymize", "hash"]] {
        let o = anon(&demo(), &fresh, args);
        assert_eq!(o.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("needs --key <FILE>") && stderr.contains("Usage: sonde anon"), "{stderr}");
        assert!(!fresh.exists());
    }
    anon_ok(&demo(), &out, &["--anonymize", "zero", "--force"]);
    assert_eq!(frames(&out).len(), frames(&demo()).len());
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("out.pcap")]);
}

#[test]
fn stdin_to_stdout() {
    let input = std::fs::read(demo()).unwrap();
    let mut child = sonde()
        .args(["anon", "-q", "--anonymize", "zero", "-r", "-", "-w", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let via_files = dir.path().join("zero.pcap");
    anon_ok(&demo(), &via_files, &["--anonymize", "zero"]);
    assert_eq!(out.stdout, std::fs::read(&via_files).unwrap());
}

#[test]
fn a_truncated_input_exits_3_and_keeps_the_frames_before() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(demo()).unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let out = dir.path().join("out.pcap");
    let o = anon(&cut, &out, &["--anonymize", "zero"]);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated"));
    // Every frame the reader could read from the cut input was written.
    let mut source = sonde_capture::open(&cut).unwrap();
    let mut readable = 0;
    while let Ok(Some(_)) = source.next_frame() {
        readable += 1;
    }
    assert!(readable > 0 && readable < frames(&demo()).len());
    assert_eq!(frames(&out).len(), readable);
}
