//! sonde's application taxonomy (docs/l7.md has the table).
//!
//! A label names the protocol a flow speaks, in lower case, one word: first the protocol its
//! payload was read as (`tls`, `quic`, `http`, `dns`, `mdns`, `llmnr`, `rtp`), then, when the
//! payload told nothing, the service of a well-known port ([`PORTS`], marked `by_port`), else
//! `unknown`. Names are IANA service names where one fits, so the RMON2 protocol directory can
//! show them as `ether2.ip.tcp.<label>` / `ether2.ip.udp.<label>`. [`ndpi_name`] gives nDPI's
//! name for each label, for comparisons with NFStream.

use crate::{Facts, Label, Transport};

/// Well-known ports: (transport, port, label), in that order (TCP first, ports rising: looked
/// up by halves). Looked up by the server's port, then the client's.
pub const PORTS: &[(Transport, u16, &str)] = &[
    (Transport::Tcp, 20, "ftp-data"),
    (Transport::Tcp, 21, "ftp"),
    (Transport::Tcp, 22, "ssh"),
    (Transport::Tcp, 23, "telnet"),
    (Transport::Tcp, 25, "smtp"),
    (Transport::Tcp, 53, "dns"),
    (Transport::Tcp, 80, "http"),
    (Transport::Tcp, 110, "pop3"),
    (Transport::Tcp, 143, "imap"),
    (Transport::Tcp, 179, "bgp"),
    (Transport::Tcp, 389, "ldap"),
    (Transport::Tcp, 443, "tls"),
    (Transport::Tcp, 445, "smb"),
    (Transport::Tcp, 465, "smtps"),
    (Transport::Tcp, 587, "smtp"),
    (Transport::Tcp, 853, "tls"),
    (Transport::Tcp, 993, "imaps"),
    (Transport::Tcp, 995, "pop3s"),
    (Transport::Tcp, 1433, "mssql"),
    (Transport::Tcp, 1883, "mqtt"),
    (Transport::Tcp, 3306, "mysql"),
    (Transport::Tcp, 3389, "rdp"),
    (Transport::Tcp, 5060, "sip"),
    (Transport::Tcp, 5222, "xmpp"),
    (Transport::Tcp, 5432, "postgresql"),
    (Transport::Tcp, 5900, "vnc"),
    (Transport::Tcp, 6379, "redis"),
    (Transport::Tcp, 8080, "http"),
    (Transport::Udp, 53, "dns"),
    (Transport::Udp, 67, "dhcp"),
    (Transport::Udp, 68, "dhcp"),
    (Transport::Udp, 69, "tftp"),
    (Transport::Udp, 123, "ntp"),
    (Transport::Udp, 137, "netbios"),
    (Transport::Udp, 138, "netbios"),
    (Transport::Udp, 161, "snmp"),
    (Transport::Udp, 162, "snmp"),
    (Transport::Udp, 443, "quic"),
    (Transport::Udp, 500, "ike"),
    (Transport::Udp, 514, "syslog"),
    (Transport::Udp, 546, "dhcpv6"),
    (Transport::Udp, 547, "dhcpv6"),
    (Transport::Udp, 1812, "radius"),
    (Transport::Udp, 1900, "ssdp"),
    (Transport::Udp, 3478, "stun"),
    (Transport::Udp, 4500, "ike"),
    (Transport::Udp, 5060, "sip"),
    (Transport::Udp, 5353, "mdns"),
    (Transport::Udp, 5355, "llmnr"),
];

/// The label of `port`'s well-known service on `transport`, if [`PORTS`] has one: a binary
/// search (a scan cost ~80 instructions a port, and every flow's label is taken).
fn port_label(transport: Transport, port: u16) -> Option<&'static str> {
    let key = |t: Transport, p: u16| (t == Transport::Udp, p);
    PORTS.binary_search_by(|&(t, p, _)| key(t, p).cmp(&key(transport, port))).ok().map(|i| PORTS[i].2)
}

/// The application of a flow, from its facts, else its ports (marked so).
pub fn label(facts: &Facts, transport: Transport, client_port: u16, server_port: u16) -> Label {
    // A protocol is told by a message read whole: a hello, a decrypted Initial (or a released
    // QUIC version), an HTTP request or response. Bytes that only look like a record header
    // (Skype's fake TLS), a draft-like version in a broadcast, or a method-like first word of
    // another protocol (RTSP, NATS) tell nothing.
    let tls_hello = facts.tls.as_ref().is_some_and(|t| t.ja3.is_some() || t.ja3s.is_some());
    let quic_initial = facts
        .quic
        .as_ref()
        .is_some_and(|q| q.tls.ja4.is_some() || matches!(q.client_version, Some(0x0000_0001 | 0x6b33_43cf)));
    let http_message = facts.http.as_ref().is_some_and(|h| h.requests + h.responses > 0);
    let from_payload = if tls_hello {
        Some("tls")
    } else if quic_initial {
        Some("quic")
    } else if http_message {
        Some("http")
    } else if facts.dns.is_some() {
        // The message format is DNS's; the port tells its multicast variants apart.
        Some(if transport == Transport::Udp && (server_port == 5353 || client_port == 5353) {
            "mdns"
        } else if transport == Transport::Udp && (server_port == 5355 || client_port == 5355) {
            "llmnr"
        } else {
            "dns"
        })
    } else if facts.rtp.is_some() {
        Some("rtp")
    } else {
        None
    };
    if let Some(name) = from_payload {
        return Label { name, by_port: false };
    }
    let by_port = |port: u16| port_label(transport, port);
    match by_port(server_port).or_else(|| by_port(client_port)) {
        Some(name) => Label { name, by_port: true },
        None => Label { name: "unknown", by_port: false },
    }
}

/// nDPI's protocol name for a label (its master protocol: nDPI's `TLS.Google` is `TLS` here),
/// `Unknown` for `unknown` and for labels of ours it has no name for.
pub fn ndpi_name(label: &str) -> &'static str {
    match label {
        "tls" => "TLS",
        "quic" => "QUIC",
        "http" => "HTTP",
        "dns" => "DNS",
        "mdns" => "MDNS",
        "llmnr" => "LLMNR",
        "rtp" => "RTP",
        "ftp-data" => "FTP_DATA",
        "ftp" => "FTP_CONTROL",
        "ssh" => "SSH",
        "telnet" => "Telnet",
        "smtp" => "SMTP",
        "smtps" => "SMTPS",
        "pop3" => "POP3",
        "pop3s" => "POPS",
        "imap" => "IMAP",
        "imaps" => "IMAPS",
        "bgp" => "BGP",
        "ldap" => "LDAP",
        "smb" => "SMBv23",
        "mssql" => "MsSQL-TDS",
        "mqtt" => "MQTT",
        "mysql" => "MySQL",
        "rdp" => "RDP",
        "sip" => "SIP",
        "xmpp" => "Jabber",
        "postgresql" => "PostgreSQL",
        "vnc" => "VNC",
        "redis" => "Redis",
        "dhcp" => "DHCP",
        "dhcpv6" => "DHCPV6",
        "tftp" => "TFTP",
        "ntp" => "NTP",
        "netbios" => "NetBIOS",
        "snmp" => "SNMP",
        "ike" => "IPSec",
        "syslog" => "Syslog",
        "radius" => "Radius",
        "ssdp" => "SSDP",
        "stun" => "STUN",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DnsFacts, HttpFacts, QuicFacts, TlsFacts};

    #[test]
    fn ports_are_in_order_and_each_found() {
        let key = |&(t, p, _): &(Transport, u16, &str)| (t == Transport::Udp, p);
        assert!(PORTS.windows(2).all(|w| key(&w[0]) < key(&w[1])), "PORTS sorted, no port twice");
        for &(t, p, name) in PORTS {
            assert_eq!(port_label(t, p), Some(name));
        }
        for (t, p) in [(Transport::Tcp, 0), (Transport::Tcp, 54), (Transport::Udp, 80), (Transport::Udp, 65535)] {
            assert_eq!(port_label(t, p), None, "{t:?} {p}");
        }
    }

    #[test]
    fn payload_first_then_ports() {
        let mut f = Facts::default();
        assert_eq!(label(&f, Transport::Tcp, 51000, 22), Label { name: "ssh", by_port: true });
        assert_eq!(
            label(&f, Transport::Tcp, 22, 51000),
            Label { name: "ssh", by_port: true },
            "the client's port when the server's tells nothing"
        );
        assert_eq!(label(&f, Transport::Udp, 51000, 22), Label { name: "unknown", by_port: false });
        assert_eq!(label(&f, Transport::Udp, 51000, 443), Label { name: "quic", by_port: true });
        f.http = Some(Box::new(HttpFacts::default()));
        assert_eq!(label(&f, Transport::Tcp, 51000, 443).name, "tls", "no HTTP message read: the port tells");
        f.http = Some(Box::new(HttpFacts { requests: 1, ..Default::default() }));
        assert_eq!(label(&f, Transport::Tcp, 51000, 443), Label { name: "http", by_port: false }, "the payload wins");
        f.tls = Some(Box::new(TlsFacts::default()));
        assert_eq!(label(&f, Transport::Tcp, 51000, 80).name, "http", "a record header alone is no hello");
        f.tls =
            Some(Box::new(TlsFacts { ja3: crate::Ja3::new("0123456789abcdef0123456789abcdef"), ..Default::default() }));
        assert_eq!(label(&f, Transport::Tcp, 51000, 80), Label { name: "tls", by_port: false });
        let f = Facts { dns: Some(Box::new(DnsFacts::default())), ..Default::default() };
        assert_eq!(label(&f, Transport::Udp, 5353, 5353).name, "mdns");
        assert_eq!(label(&f, Transport::Udp, 5355, 60000).name, "llmnr");
        assert_eq!(label(&f, Transport::Tcp, 60000, 53).name, "dns");
        let draft = QuicFacts { client_version: Some(0xff00_00a0), ..Default::default() };
        let f = Facts { quic: Some(Box::new(draft)), ..Default::default() };
        assert_eq!(label(&f, Transport::Udp, 60000, 8443).name, "unknown", "a version never released, not decrypted");
        let v1 = QuicFacts { client_version: Some(1), ..Default::default() };
        let f = Facts { quic: Some(Box::new(v1)), ..Default::default() };
        assert_eq!(label(&f, Transport::Udp, 60000, 8443).name, "quic");
    }

    #[test]
    fn every_label_has_an_ndpi_name() {
        for &(_, _, l) in PORTS {
            assert_ne!(ndpi_name(l), "Unknown", "{l}");
        }
        for l in ["tls", "quic", "http", "dns", "mdns", "llmnr", "rtp"] {
            assert_ne!(ndpi_name(l), "Unknown", "{l}");
        }
        assert_eq!(ndpi_name("unknown"), "Unknown");
    }
}
