//! HTTP/1.x and DNS facts from real captures, flow by flow, against tshark's fields.
//!
//! Every trace of INDEX.tsv whose path names HTTP or DNS is read with sonde-capture and
//! sonde-wire; each TCP/UDP flow (keyed by its 5-tuple; the client is the SYN's sender, else the
//! first sender) gets a `Session` fed every packet's payload, as the flow layer would feed its
//! first packets. tshark reads the same trace (`http.desegment_body` off, so a response counts
//! at its head as ours does); its per-frame fields are gathered by the flow of the frame as
//! sonde-wire decoded it. Compared per flow: the first request's method and Host, the first
//! response's status, the request and response counts, the first question's name (case-folded),
//! the first response's rcode and its answer section's A and AAAA addresses, the DNS query and
//! response counts. Counts are compared only where each direction carried no more than
//! `STREAM_LIMIT_BYTES` (the Session reads no further). Every disagreement must be listed in
//! `KNOWN` with its reason, and every entry of `KNOWN` must still occur. A second Session per
//! flow is fed as the flow layer feeds (the first 8 payload packets of each direction, then the
//! first 16 bytes of later UDP datagrams): the first messages' facts must be the same.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use common::{for_each_frame, indexed, parallel, traces_dir, tshark, Ends};
use sonde_l7::{Session, Transport, CLIENT, SERVER, STREAM_LIMIT_BYTES};
use sonde_wire::Transport as Wire;

/// The flow layer's feeding (crates/sonde-flow): payload packets per direction handed whole,
/// and the bytes of later UDP datagrams.
const FIRST_PACKETS: u32 = 8;
const LATER_BYTES: usize = 16;

/// tshark's fields, in this order.
const FIELDS: &[&str] = &[
    "http.request.method",
    "http.host",
    "http.response.code",
    "dns.flags.response",
    "dns.qry.name",
    "dns.flags.rcode",
    "dns.count.answers",
    "dns.resp.type",
    "dns.a",
    "dns.aaaa",
];

/// A response counts at its head, as ours; an IP fragment is dissected alone, as sonde-wire
/// reads it (no reassembly), so the DNS fields sit on the frame whose flow we know.
const TSHARK_OPTIONS: &[&str] =
    &["-o", "http.desegment_body:FALSE", "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE"];

/// What tshark showed of one flow.
#[derive(Debug, Default)]
struct Theirs {
    method: Option<String>,
    host: Option<String>,
    status: Option<String>,
    requests: u32,
    responses: u32,
    qname: Option<String>,
    rcode: Option<String>,
    /// The first response's answer addresses; None when that frame held several messages.
    answers: Option<(Vec<String>, Vec<String>)>,
    queries: u32,
    dns_responses: u32,
}

struct Flow {
    first: u64,
    session: Session,
    /// Fed as the flow layer feeds: the first `FIRST_PACKETS` payload packets of each direction
    /// whole, then only UDP datagrams, cut to their first `LATER_BYTES`.
    first_packets: Session,
    packets: [u32; 2],
    client: (IpAddr, u16),
    bytes: [u64; 2],
    theirs: Theirs,
}

/// Disagreements explained: (trace, the flow's first frame (0: every flow of the trace),
/// field, reason).
const KNOWN: &[(&str, u64, &str, &str)] = &[
    // HTTP after a SOCKS handshake: the flow's first bytes are SOCKS, not HTTP/1.x.
    ("realistic/arkime+arkime/tests/pcap/socks-http-example.pcap", 30, "http.method", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks-http-example.pcap", 30, "http.host", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks-http-example.pcap", 30, "http.status", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks-http-example.pcap", 30, "http.counts", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks-http-pass.pcap", 26, "http.method", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks-http-pass.pcap", 26, "http.host", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks-http-pass.pcap", 26, "http.status", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks-http-pass.pcap", 26, "http.counts", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks5-http-302.pcap", 1, "http.method", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks5-http-302.pcap", 1, "http.host", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks5-http-302.pcap", 1, "http.status", SOCKS),
    ("realistic/arkime+arkime/tests/pcap/socks5-http-302.pcap", 1, "http.counts", SOCKS),
    // HTTP on TCP 5060: tshark hands the port to SIP; the payload is HTTP.
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/http_on_sip_port.pcap", 1, "http.method", SIP_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/http_on_sip_port.pcap", 1, "http.host", SIP_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/http_on_sip_port.pcap", 1, "http.status", SIP_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/http_on_sip_port.pcap", 1, "http.counts", SIP_PORT),
    // HTTP inside L2TP (UDP 1701): sonde-wire does not open L2TP, so tshark's fields land on
    // the tunnel's UDP flow.
    ("robustness/kbandla+dpkt/examples/data/nb6-http.pcap", 19, "http.method", L2TP),
    ("robustness/kbandla+dpkt/examples/data/nb6-http.pcap", 19, "http.host", L2TP),
    ("robustness/kbandla+dpkt/examples/data/nb6-http.pcap", 19, "http.status", L2TP),
    ("robustness/kbandla+dpkt/examples/data/nb6-http.pcap", 19, "http.counts", L2TP),
    // A request head in IP fragments: sonde-wire does not reassemble IP, so the head stays
    // incomplete and is not counted; tshark dissects the first fragment's partial head.
    (
        "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/pcap_examples/frag_http_req.pcap",
        1,
        "http.method",
        IP_FRAGMENTS,
    ),
    (
        "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/pcap_examples/frag_http_req.pcap",
        1,
        "http.host",
        IP_FRAGMENTS,
    ),
    (
        "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/pcap_examples/frag_http_req.pcap",
        1,
        "http.counts",
        IP_FRAGMENTS,
    ),
    (
        "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/expected_output/http_req_frag.pcap",
        1,
        "http.method",
        IP_FRAGMENTS,
    ),
    (
        "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/expected_output/http_req_frag.pcap",
        1,
        "http.host",
        IP_FRAGMENTS,
    ),
    (
        "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/expected_output/http_req_frag.pcap",
        1,
        "http.counts",
        IP_FRAGMENTS,
    ),
    // HTTP/0.9 requests (no version) on connections that start with them: Zeek's http.log reads
    // GET and POST with version 0.9 (its baseline for this capture); tshark reads a request line
    // without a version only on a connection it already knows as HTTP
    // (http-09-content-length-confusion.pcap, where the server speaks first, agrees).
    ("realistic/zeek+zeek/testing/btest/Traces/http/http_09.pcap", 1, "http.method", HTTP_09),
    ("realistic/zeek+zeek/testing/btest/Traces/http/http_09.pcap", 1, "http.counts", HTTP_09),
    ("realistic/zeek+zeek/testing/btest/Traces/http/http_09.pcap", 11, "http.method", HTTP_09),
    ("realistic/zeek+zeek/testing/btest/Traces/http/http_09.pcap", 11, "http.counts", HTTP_09),
    // DNS on UDP 443 (DNSCrypt resolvers answering plain DNS certificate queries) and 8053:
    // not a DNS port for us; tshark's heuristic DNS dissector takes any UDP port.
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/avast_securedns.pcapng", 0, "dns.qname", DNS_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/avast_securedns.pcapng", 0, "dns.rcode", DNS_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/avast_securedns.pcapng", 0, "dns.counts", DNS_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/dnscrypt-v1-and-resolver-pings.pcap", 0, "dns.qname", DNS_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/dnscrypt-v1-and-resolver-pings.pcap", 0, "dns.rcode", DNS_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/dnscrypt-v1-and-resolver-pings.pcap", 0, "dns.counts", DNS_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/dnscrypt-v2.pcap", 0, "dns.rcode", DNS_PORT),
    ("realistic/ntop+nDPI/tests/cfgs/default/pcap/dnscrypt-v2.pcap", 0, "dns.counts", DNS_PORT),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns_udp_8053.pcap", 1, "dns.qname", DNS_PORT),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns_udp_8053.pcap", 1, "dns.rcode", DNS_PORT),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns_udp_8053.pcap", 1, "dns.answers", DNS_PORT),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns_udp_8053.pcap", 1, "dns.counts", DNS_PORT),
    // The flow's only message has a question we cannot read (a pointer chain, a bad label type,
    // a forward pointer): not recognised as DNS, so no facts; tshark shows the header of a
    // malformed message.
    (
        "robustness/seladb+PcapPlusPlus/Tests/Packet++Test/PacketExamples/dns_stack_overflow.pcap",
        1,
        "dns.rcode",
        UNREADABLE,
    ),
    (
        "robustness/seladb+PcapPlusPlus/Tests/Packet++Test/PacketExamples/dns_stack_overflow.pcap",
        1,
        "dns.counts",
        UNREADABLE,
    ),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns-badlabel.pcap", 1, "dns.qname", UNREADABLE),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns-badlabel.pcap", 1, "dns.rcode", UNREADABLE),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns_fwdptr.pcap", 1, "dns.qname", UNREADABLE),
    ("robustness/the-tcpdump-group+tcpdump/tests/dns_fwdptr.pcap", 1, "dns.rcode", UNREADABLE),
];

/// Flows whose first messages' facts come later than the flow layer's first packets:
/// (trace, the flow's first frame, reason). Each must still differ.
const FIRST_PACKETS_KNOWN: &[(&str, u64, &str)] = &[(
    "realistic/nfstream+nfstream/tests/pcaps/mdns.pcap",
    35,
    "mDNS queries first: the first response is its direction's 9th datagram, of which the flow layer \
     hands 16 bytes (rcode, no answers)",
)];

const SOCKS: &str = "HTTP behind a SOCKS handshake is not recognised";
const HTTP_09: &str = "tshark reads no HTTP/0.9 request that opens a connection; Zeek's http.log does, as sonde";
const SIP_PORT: &str = "tshark decodes TCP 5060 as SIP";
const L2TP: &str = "sonde-wire does not open L2TP";
const IP_FRAGMENTS: &str = "no IP reassembly: the head is incomplete";
const DNS_PORT: &str = "DNS outside ports 53/5353/5355 is not recognised";
const UNREADABLE: &str = "the first message's question is unreadable: not recognised";

#[test]
fn http_and_dns_facts_agree_with_tshark() {
    let dir = traces_dir();
    let traces = indexed(|p| {
        let name = p.rsplit('/').next().unwrap_or(p);
        name.contains("http") || name.contains("dns")
    });
    assert!(traces.len() > 100, "INDEX.tsv lists {} HTTP/DNS traces", traces.len());
    let mut compared = (0usize, 0usize); // (http flows, dns flows)
    let mut fields_compared = 0usize;
    let mut per_field: BTreeMap<String, (usize, usize)> = BTreeMap::new(); // (compared, equal)
    let mut problems = sonde_l7::Problems::default();
    let mut first_packets = (0usize, Vec::new());
    let mut found: Vec<(String, u64, String, String)> = Vec::new();
    // tshark's start dominates: run it for every trace first, two at a time.
    let runs = parallel(&traces, 2, |rel| tshark(&dir.join(rel), FIELDS, TSHARK_OPTIONS));
    for (rel, rows) in traces.iter().zip(runs) {
        let path = dir.join(rel);
        let mut flows: HashMap<Ends, Flow> = HashMap::new();
        let mut frame_flow: BTreeMap<u64, Ends> = BTreeMap::new();
        for_each_frame(&path, |d| {
            let Some(ends) = Ends::of(&d.summary) else { return };
            let key = ends.key();
            frame_flow.insert(d.number, key);
            let (seq, wire_len, syn_ack) = match d.summary.transport {
                // A SYN's data starts one past its sequence number (TCP Fast Open).
                Some(Wire::Tcp(t)) => {
                    (Some(t.seq.wrapping_add(u32::from(t.flags.syn()))), t.payload_len, t.flags.syn() && t.flags.ack())
                }
                Some(Wire::Udp(u)) => (None, u.payload_len, false),
                _ => return,
            };
            let flow = flows.entry(key).or_insert_with(|| {
                let client = if syn_ack { ends.dst } else { ends.src };
                let server = if client == ends.src { ends.dst } else { ends.src };
                let transport = if ends.tcp { Transport::Tcp } else { Transport::Udp };
                Flow {
                    first: d.number,
                    session: Session::new(transport, client.1, server.1),
                    first_packets: Session::new(transport, client.1, server.1),
                    packets: [0; 2],
                    client,
                    bytes: [0; 2],
                    theirs: Theirs::default(),
                }
            });
            let dir = if ends.src == flow.client { CLIENT } else { SERVER };
            // The captured payload, without the link layer's padding.
            let payload = d.payload.get(..d.payload.len().min(wire_len as usize)).unwrap_or(&[]);
            flow.bytes[dir] += u64::from(wire_len);
            if wire_len > 0 {
                flow.session.on_payload(dir, d.ts_ns, seq, payload, wire_len);
                flow.packets[dir] += 1;
                if flow.packets[dir] <= FIRST_PACKETS {
                    flow.first_packets.on_payload(dir, d.ts_ns, seq, payload, wire_len);
                } else if seq.is_none() {
                    let start = &payload[..payload.len().min(LATER_BYTES)];
                    flow.first_packets.on_payload(dir, d.ts_ns, seq, start, wire_len);
                }
            }
        });
        for (n, vals) in &rows {
            let Some(key) = frame_flow.get(n) else { continue };
            let Some(flow) = flows.get_mut(key) else { continue };
            theirs_frame(&mut flow.theirs, vals);
        }
        let mut ordered: Vec<&Flow> = flows.values().collect();
        ordered.sort_by_key(|f| f.first);
        for flow in ordered {
            let facts = flow.session.facts();
            let t = &flow.theirs;
            let whole = flow.bytes.iter().all(|&b| b <= u64::from(STREAM_LIMIT_BYTES));
            problems.add(&facts.problems);
            // The first messages' facts are the same from the first packets alone.
            let few = flow.first_packets.facts();
            let firsts = |f: &sonde_l7::Facts| {
                let h = f.http.as_deref().map(|h| (h.method.clone(), h.host.clone(), h.user_agent.clone(), h.status));
                let d = f.dns.as_deref().map(|d| (d.query.clone(), d.qtype, d.rcode, d.answers.clone()));
                format!("{h:?} {d:?}")
            };
            first_packets.0 += 1;
            let excused = FIRST_PACKETS_KNOWN.iter().any(|k| k.0 == rel && k.1 == flow.first);
            if (firsts(facts) != firsts(few)) != excused {
                first_packets.1.push(format!(
                    "{rel} flow@{}: all packets {}, first packets {}",
                    flow.first,
                    firsts(facts),
                    firsts(few)
                ));
            }
            let mut check = |field: &str, ours: String, theirs: String| {
                fields_compared += 1;
                let e = per_field.entry(field.to_owned()).or_default();
                e.0 += 1;
                e.1 += usize::from(ours == theirs);
                if ours != theirs {
                    found.push((
                        rel.clone(),
                        flow.first,
                        field.to_owned(),
                        format!("ours {ours:?}, tshark {theirs:?}"),
                    ));
                }
            };
            let h = facts.http.as_deref();
            if h.is_some() || t.method.is_some() || t.status.is_some() {
                compared.0 += 1;
                check("http.method", format!("{:?}", h.and_then(|h| h.method.clone())), format!("{:?}", t.method));
                check("http.host", format!("{:?}", h.and_then(|h| h.host.clone())), format!("{:?}", t.host));
                check(
                    "http.status",
                    format!("{:?}", h.and_then(|h| h.status).map(|s| s.to_string())),
                    format!("{:?}", t.status),
                );
                if whole {
                    let ours = h.map_or((0, 0), |h| (h.requests, h.responses));
                    check("http.counts", format!("{ours:?}"), format!("{:?}", (t.requests, t.responses)));
                }
            }
            let d = facts.dns.as_deref();
            if d.is_some() || t.qname.is_some() || t.rcode.is_some() {
                compared.1 += 1;
                check(
                    "dns.qname",
                    format!("{:?}", d.and_then(|d| d.query.clone())),
                    format!("{:?}", t.qname.as_ref().map(|q| tshark_name(q))),
                );
                check(
                    "dns.rcode",
                    format!("{:?}", d.and_then(|d| d.rcode).map(|r| r.to_string())),
                    format!("{:?}", t.rcode),
                );
                if let Some((a, aaaa)) = &t.answers {
                    let ours = d.map(|d| &d.answers[..]).unwrap_or(&[]);
                    let v4: Vec<String> = ours.iter().filter(|a| a.is_ipv4()).map(|a| a.to_string()).collect();
                    let v6: Vec<String> = ours.iter().filter(|a| a.is_ipv6()).map(|a| a.to_string()).collect();
                    check("dns.answers", format!("{:?}", (v4, v6)), format!("{:?}", (a, aaaa)));
                }
                if whole {
                    let ours = d.map_or((0, 0), |d| (d.queries, d.responses));
                    check("dns.counts", format!("{ours:?}"), format!("{:?}", (t.queries, t.dns_responses)));
                }
            }
        }
    }
    let mut unexplained = Vec::new();
    for (trace, first, field, what) in &found {
        match KNOWN.iter().find(|k| k.0 == trace && (k.1 == *first || k.1 == 0) && k.2 == field) {
            Some(k) => eprintln!("known: {trace} flow@{first} {field}: {what} ({})", k.3),
            None => unexplained.push(format!("{trace} flow@{first} {field}: {what}")),
        }
    }
    let stale: Vec<_> =
        KNOWN.iter().filter(|k| !found.iter().any(|f| f.0 == k.0 && (f.1 == k.1 || k.1 == 0) && f.2 == k.2)).collect();
    eprintln!(
        "{} traces, {} HTTP flows and {} DNS flows compared ({} fields), {} disagreements ({} known)",
        traces.len(),
        compared.0,
        compared.1,
        fields_compared,
        found.len(),
        found.len() - unexplained.len()
    );
    eprintln!("per field (compared, equal): {per_field:?}");
    eprintln!("problems counted over these flows: {problems:?}");
    eprintln!(
        "{} flows read from their first packets only, {} known to differ",
        first_packets.0,
        FIRST_PACKETS_KNOWN.len()
    );
    assert!(
        first_packets.1.is_empty(),
        "reading the first packets only, facts differ (or a known difference is gone):\n{}",
        first_packets.1.join("\n")
    );
    assert!(compared.0 >= 100 && compared.1 >= 100, "too few flows compared: {compared:?}");
    assert!(unexplained.is_empty(), "{} unexplained disagreements:\n{}", unexplained.len(), unexplained.join("\n"));
    assert!(stale.is_empty(), "KNOWN entries that no longer occur: {stale:?}");
}

/// Adds one frame's tshark fields to its flow's.
fn theirs_frame(t: &mut Theirs, vals: &[Vec<String>]) {
    let field = |i: usize| vals.get(i).map(Vec::as_slice).unwrap_or(&[]);
    let (methods, hosts, codes) = (field(0), field(1), field(2));
    if t.method.is_none() {
        t.method = methods.first().cloned();
    }
    if t.host.is_none() {
        t.host = hosts.first().cloned();
    }
    if t.status.is_none() {
        t.status = codes.first().cloned();
    }
    t.requests += methods.len() as u32;
    t.responses += codes.len() as u32;
    let (flags, names, rcodes, counts, types, a, aaaa) =
        (field(3), field(4), field(5), field(6), field(7), field(8), field(9));
    if t.qname.is_none() {
        t.qname = names.first().cloned();
    }
    let queries = flags.iter().filter(|f| f.as_str() == "0" || f.as_str() == "False").count();
    t.queries += queries as u32;
    t.dns_responses += (flags.len() - queries) as u32;
    if t.rcode.is_none() {
        if let Some(i) = flags.iter().position(|f| f.as_str() == "1" || f.as_str() == "True") {
            t.rcode = rcodes.get(i).cloned();
            if flags.len() == 1 {
                // The answer section is the first `dns.count.answers` records.
                let n: usize = counts.first().and_then(|c| c.parse().ok()).unwrap_or(0);
                let answers = &types[..n.min(types.len())];
                let n4 = answers.iter().filter(|t| t.as_str() == "1").count();
                let n6 = answers.iter().filter(|t| t.as_str() == "28").count();
                t.answers = Some((a.iter().take(n4).cloned().collect(), aaaa.iter().take(n6).cloned().collect()));
            }
        }
    }
}

/// tshark's query name in our form: lower case, `<Root>` as "".
fn tshark_name(q: &str) -> String {
    if q == "<Root>" {
        String::new()
    } else {
        q.to_ascii_lowercase()
    }
}
