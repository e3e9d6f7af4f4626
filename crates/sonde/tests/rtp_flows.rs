//! RTP through the whole run (reader → workers → udp_flows.tsv), stream by stream against
//! tshark's RTP analysis. The parser's own test (crates/sonde-l7/tests/rtp.rs) feeds it as the
//! flow layer should; this one checks that the flow layer does: each direction's first packets
//! whole, later datagrams' heads, every datagram of the flow in order, and the facts written to
//! the right flow's RTP columns.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{analyze, read_tsv, shared_dir};

/// (source, source port, destination, destination port, SSRC): one RTP stream.
type StreamKey = (IpAddr, u16, IpAddr, u16, u32);

/// One row of `tshark -z rtp,streams`.
#[derive(Debug, Clone)]
struct Row {
    /// The payload types' names, e.g. `g711A, CN`.
    payload: String,
    packets: u64,
    lost: i64,
    max_jitter_ms: f64,
    mean_jitter_ms: f64,
}

/// What tshark's dissection says of a stream's packets, in capture order.
#[derive(Debug, Default)]
struct Packets {
    first_pt: Option<u8>,
    /// Packets with the marker bit after the stream's first.
    later_markers: u64,
}

const NDPI: &str = "realistic/ntop+nDPI/tests/cfgs/default/pcap/";

/// The parser test's captures (every one of ../shared/traces in which tshark's heuristic finds
/// RTP that sonde claims), with the streams compared there: as many must be compared here.
const RTP_TRACES: &[(&str, usize)] = &[
    ("realistic/arkime+arkime/tests/pcap/gtp-iphone.pcap", 2),
    ("realistic/irontec+sngrep/tests/aaa.pcap", 1),
    ("realistic/nfstream+nfstream/tests/pcaps/wa_video.pcap", 4),
    ("FAX-Call-t38-CA-TDM-SIP-FB-1.pcap", 2),
    ("KakaoTalk_talk.pcap", 4),
    ("discord.pcap", 21),
    ("false_positives.pcapng", 7),
    ("geforcenow.pcapng", 1),
    ("i3d.pcap", 4),
    ("rtp.pcapng", 4),
    ("sip.pcap", 1),
    ("skinny.pcap", 6),
    ("skype-conference-call.pcap", 1),
    ("stun.pcap", 1),
    ("stun_classic.pcap", 2),
    ("stun_dtls_rtp.pcapng", 1),
    ("stun_google_meet.pcapng", 5),
    ("stun_signal.pcapng", 4),
    ("stun_wa_call.pcapng", 6),
    ("teams.pcap", 1),
    ("wa_video.pcap", 4),
    ("wa_voice.pcap", 4),
    ("whatsapp_login_call.pcap", 8),
];

fn trace(shared: &Path, name: &str) -> PathBuf {
    let rel = if name.contains('/') { name.to_string() } else { format!("{NDPI}{name}") };
    let path = shared.join("traces").join(rel);
    assert!(path.is_file(), "missing shared capture {}", path.display());
    path
}

fn tshark_out(path: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-o", "rtp.heuristic_rtp:TRUE"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("tshark: {e} (make deps installs it)"));
    assert!(out.status.success(), "tshark on {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// tshark's RTP streams (heuristic RTP on every UDP port).
fn rtp_streams(path: &Path) -> BTreeMap<StreamKey, Row> {
    tshark_out(path, &["-q", "-z", "rtp,streams"]).lines().filter_map(parse_row).collect()
}

/// `start end src sport dst dport 0xSSRC payload... pkts lost (pct%) min_delta mean_delta
/// max_delta min_jitter mean_jitter max_jitter [X]`.
fn parse_row(line: &str) -> Option<(StreamKey, Row)> {
    let mut t: Vec<&str> = line.split_whitespace().collect();
    if t.len() < 16 || !t[6].starts_with("0x") {
        return None;
    }
    if t.last() == Some(&"X") {
        t.pop();
    }
    let n = t.len();
    assert!(t[n - 7].ends_with("%)"), "unexpected tshark row layout: {line}");
    let key = (t[2].parse().ok()?, t[3].parse().ok()?, t[4].parse().ok()?, t[5].parse().ok()?, {
        u32::from_str_radix(&t[6][2..], 16).ok()?
    });
    let row = Row {
        payload: t[7..n - 9].join(" "),
        packets: t[n - 9].parse().ok()?,
        lost: t[n - 8].parse().ok()?,
        max_jitter_ms: t[n - 1].parse().ok()?,
        mean_jitter_ms: t[n - 2].parse().ok()?,
    };
    Some((key, row))
}

/// The last of a field's comma-separated values: the innermost layer's (GTP tunnels).
fn last(field: &str) -> &str {
    field.rsplit(',').next().unwrap_or(field)
}

/// The stream of a tshark fields line opening with ip.src, ipv6.src, udp.srcport, ip.dst,
/// ipv6.dst, udp.dstport, then SSRC as hex.
fn stream_of(f: &[&str]) -> Option<StreamKey> {
    let ip = |v4: &str, v6: &str| if v6.is_empty() { last(v4).parse().ok() } else { last(v6).parse().ok() };
    let ssrc = last(f[6]).trim_start_matches("0x");
    Some((ip(f[0], f[1])?, last(f[2]).parse().ok()?, ip(f[3], f[4])?, last(f[5]).parse().ok()?, {
        u32::from_str_radix(ssrc, 16).ok()?
    }))
}

const ENDS: [&str; 6] = ["-e", "ip.src", "-e", "ipv6.src", "-e", "udp.srcport"];
const ENDS_TO: [&str; 6] = ["-e", "ip.dst", "-e", "ipv6.dst", "-e", "udp.dstport"];

/// Each stream's first payload type and later marker bits, from tshark's RTP dissection.
fn rtp_packets(path: &Path) -> HashMap<StreamKey, Packets> {
    let mut args = vec!["-Y", "rtp && !icmp && !icmpv6", "-T", "fields"];
    args.extend(ENDS);
    args.extend(ENDS_TO);
    args.extend(["-e", "rtp.ssrc", "-e", "rtp.p_type", "-e", "rtp.marker"]);
    let mut streams: HashMap<StreamKey, Packets> = HashMap::new();
    for line in tshark_out(path, &args).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let Some(key) = stream_of(&f) else { continue };
        let s = streams.entry(key).or_default();
        if s.first_pt.is_some() {
            s.later_markers += u64::from(matches!(last(f[8]), "1" | "True"));
        } else {
            s.first_pt = last(f[7]).parse().ok();
        }
    }
    streams
}

/// Datagrams of `stream` that tshark did not dissect as RTP although they are RTP version 2
/// with its SSRC (byte 1 outside RTCP's 192-223): T.38 set up by SDP on the port, SRTP whose
/// last byte (the tag's) is not a possible padding count.
fn not_rtp(path: &Path, (src, sport, dst, dport, ssrc): StreamKey) -> u64 {
    let ip = if src.is_ipv4() { "ip" } else { "ipv6" };
    let filter =
        format!("{ip}.src=={src} && {ip}.dst=={dst} && udp.srcport=={sport} && udp.dstport=={dport} && !rtp.ssrc");
    let want = format!("{ssrc:08x}");
    tshark_out(path, &["-Y", &filter, "-T", "fields", "-e", "udp.payload"])
        .lines()
        .filter(|hex| {
            let hex = hex.replace(':', "");
            let byte = |at: usize| hex.get(at..at + 2).and_then(|b| u8::from_str_radix(b, 16).ok());
            byte(0).is_some_and(|b| b >> 6 == 2)
                && byte(2).is_some_and(|pt| !(192..=223).contains(&pt))
                && hex.get(16..24) == Some(want.as_str())
        })
        .count() as u64
}

/// A column's value as a number; `None` for `-`.
fn value<T: std::str::FromStr>(row: &HashMap<String, String>, col: &str) -> Option<T> {
    let v = row.get(col).unwrap_or_else(|| panic!("no column {col} in udp_flows.tsv"));
    if v == "-" {
        return None;
    }
    Some(v.parse().unwrap_or_else(|_| panic!("{col} = {v:?}")))
}

/// What the whole comparison found.
#[derive(Default)]
struct Tally {
    streams: usize,
    with_jitter: usize,
    no_clock: usize,
    rtp_flows: usize,
    bad: Vec<String>,
    explained: Vec<String>,
}

/// One direction of a flow row and tshark's stream for it.
struct Pair<'a> {
    name: &'a str,
    path: &'a Path,
    row: &'a HashMap<String, String>,
    /// The row's direction: `c` or `s`.
    p: &'a str,
    key: StreamKey,
    tshark: &'a Row,
    packets: Option<&'a Packets>,
}

/// Compares the RTP columns of one direction with tshark's stream.
fn compare_dir(pair: Pair<'_>, t: &mut Tally) {
    let Pair { name, path, row, p, key, tshark, packets } = pair;
    let col = |c: &str| format!("{p}_{c}");
    let ours_pkts: u64 = value(row, &col("rtp_pkts")).expect("packets with an SSRC");
    let ours_lost: u64 = value(row, &col("rtp_lost")).expect("lost with an SSRC");
    let ours_pt: u8 = value(row, &col("rtp_pt")).expect("payload type with an SSRC");
    let jitter_max: Option<f64> = value(row, &col("rtp_jitter_max"));
    let jitter_avg: Option<f64> = value(row, &col("rtp_jitter_avg"));
    let what = format!("{name}: {}:{} -> {}:{} ssrc {:#010x} ({})", key.0, key.1, key.2, key.3, key.4, tshark.payload);

    let missed = if ours_pkts != tshark.packets { not_rtp(path, key) } else { 0 };
    if missed > 0 {
        t.explained.push(format!(
            "{what}: ours {ours_pkts} packets, lost {ours_lost}; tshark {} + {missed} it did not take as RTP, lost {}",
            tshark.packets, tshark.lost
        ));
    }
    // The column clamps a negative loss (duplicates) to 0.
    if ours_pkts != tshark.packets + missed || ours_lost.abs_diff(tshark.lost.max(0) as u64) > missed {
        t.bad.push(format!(
            "{what}: packets/lost {ours_pkts}/{ours_lost}, tshark {}/{} (+{missed} not RTP to tshark)",
            tshark.packets, tshark.lost
        ));
    }
    match packets.and_then(|s| s.first_pt) {
        Some(pt) if pt == ours_pt => {}
        other => t.bad.push(format!("{what}: payload type {ours_pt}, tshark's first {other:?}")),
    }
    match (jitter_max, jitter_avg) {
        (Some(max), Some(mean)) => {
            t.with_jitter += 1;
            let near = |a: f64, b: f64| (a - b).abs() <= 0.01 + 0.05 * b;
            if !near(max, tshark.max_jitter_ms) {
                t.bad.push(format!("{what}: max jitter {max} ms, tshark {}", tshark.max_jitter_ms));
            }
            // tshark leaves packets with the marker bit out of its mean (and divides by all
            // packets): the means differ when markers follow the first packet.
            let markers = packets.map_or(0, |s| s.later_markers);
            if near(mean, tshark.mean_jitter_ms) {
            } else if markers > 0 {
                t.explained.push(format!(
                    "{what}: {markers} marker packets after the first, mean jitter {mean:.3} ms vs tshark's {:.3}",
                    tshark.mean_jitter_ms
                ));
            } else {
                t.bad.push(format!("{what}: mean jitter {mean} ms, tshark {}", tshark.mean_jitter_ms));
            }
        }
        // No clock (a dynamic or unassigned payload type): neither has a jitter.
        (None, None) if tshark.max_jitter_ms == 0.0 && tshark.mean_jitter_ms == 0.0 => t.no_clock += 1,
        // A dynamic type's clock comes from SDP, which tshark reads and sonde does not.
        (None, None) if ours_pt >= 96 => {
            t.no_clock += 1;
            t.explained.push(format!(
                "{what}: dynamic payload type {ours_pt}, no jitter; tshark's clock from SDP: max {:.3} ms",
                tshark.max_jitter_ms
            ));
        }
        other => t.bad.push(format!("{what}: jitter (max, mean) {other:?} for payload type {ours_pt}")),
    }
    t.streams += 1;
}

#[test]
fn udp_flow_log_rtp_columns_equal_tsharks_streams() {
    let Some(shared) = shared_dir() else { return };
    let verbose = std::env::var_os("RTP_VERBOSE").is_some();
    let list: Vec<(String, usize)> = match std::env::var("RTP_TRACES") {
        Ok(v) => v.split(',').map(|s| (s.to_string(), 0)).collect(),
        Err(_) => RTP_TRACES.iter().map(|&(n, w)| (n.to_string(), w)).collect(),
    };
    let mut t = Tally::default();
    for (name, want) in &list {
        let path = trace(&shared, name);
        let (dir, out) = analyze(&path, &[]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let rows = read_tsv(&dir.path().join("udp_flows.tsv"));
        let streams = rtp_streams(&path);
        let packets = rtp_packets(&path);
        let before = t.streams;
        let mut tuples: BTreeMap<(IpAddr, u16, IpAddr, u16), usize> = BTreeMap::new();
        for row in &rows {
            let ends = |p: &str| -> (IpAddr, u16) {
                let ip =
                    row[&format!("{p}_ip")].parse().unwrap_or_else(|_| panic!("{p}_ip {:?}", row[&format!("{p}_ip")]));
                (ip, value(row, &format!("{p}_port")).expect("port"))
            };
            let (c, s) = (ends("c"), ends("s"));
            let has_rtp = ["c_rtp_ssrc", "s_rtp_ssrc", "c_rtcp_pkts", "s_rtcp_pkts"]
                .iter()
                .any(|col| value::<u64>(row, col).is_some());
            if !has_rtp {
                continue;
            }
            t.rtp_flows += 1;
            *tuples.entry((c.0, c.1, s.0, s.1)).or_default() += 1;
            if row["app"] != "rtp" {
                t.bad.push(format!("{name}: flow {c:?} -> {s:?} has RTP columns but app {}", row["app"]));
            }
            for (p, (from, to)) in [("c", (c, s)), ("s", (s, c))] {
                let Some(ssrc) = value::<u32>(row, &format!("{p}_rtp_ssrc")) else { continue };
                let key = (from.0, from.1, to.0, to.1, ssrc);
                let Some(tshark) = streams.get(&key) else {
                    t.bad.push(format!("{name}: tshark has no stream {key:?}"));
                    continue;
                };
                if verbose {
                    let cols =
                        ["rtp_pt", "rtp_pkts", "rtp_lost", "rtp_oos", "rtp_dup", "rtp_jitter_avg", "rtp_jitter_max"];
                    let ours: Vec<&str> = cols.iter().map(|c| row[&format!("{p}_{c}")].as_str()).collect();
                    eprintln!("{name}: {key:?} ours {ours:?}\n  tshark {tshark:?}");
                }
                let pair = Pair { name, path: &path, row, p, key, tshark, packets: packets.get(&key) };
                compare_dir(pair, &mut t);
            }
        }
        // A stream cut into several flows (the idle timeout) would be compared piecewise.
        for (tuple, n) in tuples.iter().filter(|(_, &n)| n > 1) {
            t.bad.push(format!("{name}: {n} RTP flows for {tuple:?}"));
        }
        let compared = t.streams - before;
        eprintln!("{name}: tshark streams {}, streams compared {compared}", streams.len());
        if compared < *want {
            t.bad.push(format!("{name}: compared {compared} streams, the parser's test {want}"));
        }
    }
    eprintln!(
        "compared {} RTP streams of {} RTP flows with tshark's, {} with a jitter, {} without a clock",
        t.streams, t.rtp_flows, t.with_jitter, t.no_clock
    );
    for e in &t.explained {
        eprintln!("explained: {e}");
    }
    assert!(t.bad.is_empty(), "{} disagreements:\n{}", t.bad.len(), t.bad.join("\n"));
    if list.len() == RTP_TRACES.len() {
        assert!(t.streams >= 94, "only {} streams compared", t.streams);
    }
}
