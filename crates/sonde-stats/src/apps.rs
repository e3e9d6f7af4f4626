//! RMON2's application layer for one interval (RFC 4502's alHost and alMatrix tables and its
//! protocol directory as a hierarchy): traffic by host and application, by host pair and
//! application, and by protocol path, `ether2.ip.tcp.tls`, whose counts add up.
//!
//! A flow's application is its [`sonde_l7::label`], known only when the flow ends, so these
//! tables are filled from flow records by the workers ([`crate::FlowIntervals`]) and **a flow's
//! whole traffic is charged to the interval of its last packet**: the interval that counts it
//! closed and holds its metrics, and the last one it can still change (charging the first would
//! rewrite intervals a live run has long published). A flow longer than the interval therefore
//! shows all its traffic at its end: these tables say which applications the flows that ended
//! carried, the packet tables (hosts.tsv, …) when the packets went by.
//!
//! The host and matrix tables are [`Sampled`]: at most `--table-size` rows per interval, chosen
//! by key, so that the workers' tables merge, by adding, into the table one worker would have
//! made. The directory needs no bound: its keys are IP versions, IP protocols and the labels'
//! fixed taxonomy.

use std::net::IpAddr;

use rustc_hash::FxHashMap;
use sonde_l7::Label;

use crate::tables::{HostRow, ProtoKey, ProtoRow, Row, Sampled, Traffic};

/// A flow's application as the tables key it: a [`Label`], ordered and hashable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct App {
    /// The label's name (`tls`, `dns`, …).
    pub name: &'static str,
    /// Told by a well-known port only.
    pub by_port: bool,
}

impl App {
    /// The name of a flow nothing told the application of.
    pub const UNKNOWN: &'static str = "unknown";

    pub fn of(label: Label) -> App {
        App { name: label.name, by_port: label.by_port }
    }

    /// Whether the label names an application (not `unknown`).
    pub fn known(self) -> bool {
        self.name != App::UNKNOWN
    }
}

/// A protocol directory entry as counted: the network and transport of a flow and its
/// application, `None` when unknown (the transport node's own traffic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirKey {
    pub ipv6: bool,
    pub ip_protocol: u8,
    pub app: Option<App>,
}

/// One ended flow as the application tables see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppFlow {
    pub client: IpAddr,
    pub server: IpAddr,
    pub ip_protocol: u8,
    pub app: App,
    /// IP packets and bytes each side sent.
    pub client_sent: Traffic,
    pub server_sent: Traffic,
}

/// One interval's application-layer tables (from one worker, or merged).
#[derive(Debug, Clone)]
pub struct AppTables {
    /// alHost: per host and application, what it sent and received and the flows it took part in.
    pub hosts: Sampled<(IpAddr, App), HostRow>,
    /// alMatrix (source to destination): per host pair and application, what the source sent
    /// and the flows.
    pub pairs: Sampled<(IpAddr, IpAddr, App), ProtoRow>,
    /// The directory's counted entries; [`AppTables::directory`] makes the hierarchy.
    pub directory: FxHashMap<DirKey, ProtoRow>,
}

impl AppTables {
    pub fn new(cap: usize) -> AppTables {
        AppTables { hosts: Sampled::new(cap), pairs: Sampled::new(cap), directory: FxHashMap::default() }
    }

    /// Counts one flow: one addition to each of its hosts' rows (one when it talks to itself),
    /// to each direction that sent a packet in the matrix, and to its directory entry.
    pub fn flow(&mut self, f: &AppFlow) {
        let mut both = f.client_sent;
        both.merge(&f.server_sent);
        if f.client == f.server {
            self.hosts.add((f.client, f.app), &HostRow { sent: both, received: both, flows: 1 });
            self.pairs.add((f.client, f.client, f.app), &ProtoRow { traffic: both, flows: 1 });
        } else {
            let client = HostRow { sent: f.client_sent, received: f.server_sent, flows: 1 };
            self.hosts.add((f.client, f.app), &client);
            let server = HostRow { sent: f.server_sent, received: f.client_sent, flows: 1 };
            self.hosts.add((f.server, f.app), &server);
            for (src, dst, sent) in [(f.client, f.server, f.client_sent), (f.server, f.client, f.server_sent)] {
                if sent.packets > 0 {
                    self.pairs.add((src, dst, f.app), &ProtoRow { traffic: sent, flows: 1 });
                }
            }
        }
        let key = DirKey { ipv6: f.client.is_ipv6(), ip_protocol: f.ip_protocol, app: f.app.known().then_some(f.app) };
        self.directory.entry(key).or_default().add(&ProtoRow { traffic: both, flows: 1 });
    }

    /// Adds another worker's (or part's) tables.
    pub fn merge(&mut self, other: &AppTables) {
        self.hosts.merge(&other.hosts);
        self.pairs.merge(&other.pairs);
        for (k, v) in &other.directory {
            self.directory.entry(*k).or_default().add(v);
        }
    }

    /// The protocol directory as a hierarchy, in depth-first order (a node before its
    /// children, children by name): `ether2`, `ether2.ip`, `ether2.ip.tcp`, `ether2.ip.tcp.tls`,
    /// … A node's `total` is the sum of its children's plus its `own` (the flows it told no
    /// more of: on a transport node, those of unknown application).
    pub fn directory(&self) -> Vec<DirNode> {
        let mut nodes: FxHashMap<(Vec<String>, bool), DirNode> = FxHashMap::default();
        for (key, row) in &self.directory {
            let mut path = vec!["ether2".to_string()];
            path.push(if key.ipv6 { "ipv6" } else { "ip" }.to_string());
            path.push(ProtoKey { ip_protocol: key.ip_protocol, port: 0 }.protocol_name());
            if let Some(app) = key.app {
                // A name with a dot would make a level of its own.
                path.push(app.name.replace('.', "_"));
            }
            let by_port = key.app.is_some_and(|a| a.by_port);
            for depth in 1..=path.len() {
                let leaf = depth == path.len();
                let node = nodes.entry((path[..depth].to_vec(), leaf && by_port)).or_insert_with(|| DirNode {
                    path: path[..depth].join("."),
                    by_port: leaf && by_port,
                    total: ProtoRow::default(),
                    own: ProtoRow::default(),
                });
                node.total.add(row);
                if leaf {
                    node.own.add(row);
                }
            }
        }
        let mut nodes: Vec<_> = nodes.into_iter().collect();
        nodes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        nodes.into_iter().map(|(_, node)| node).collect()
    }
}

/// A node of the protocol directory's hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirNode {
    /// `ether2.ip.tcp.tls`: RMON2's base layer (every trace's; the records do not keep the link
    /// type), the network, the transport, the application.
    pub path: String,
    /// The leaf's application was told by its port only (two leaves may share a path: one told
    /// by the payload, one by the port).
    pub by_port: bool,
    /// The node's flows and their traffic, its children's included.
    pub total: ProtoRow,
    /// The part no child accounts for.
    pub own: ProtoRow,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(client: &str, server: &str, app: App, sent: (u64, u64), received: (u64, u64)) -> AppFlow {
        AppFlow {
            client: client.parse().unwrap(),
            server: server.parse().unwrap(),
            ip_protocol: 6,
            app,
            client_sent: Traffic { packets: sent.0, bytes: sent.1 },
            server_sent: Traffic { packets: received.0, bytes: received.1 },
        }
    }

    const TLS: App = App { name: "tls", by_port: false };
    const TLS_PORT: App = App { name: "tls", by_port: true };
    const UNKNOWN: App = App { name: App::UNKNOWN, by_port: false };

    #[test]
    fn a_flow_counts_once_per_host_direction_and_directory_entry() {
        let mut t = AppTables::new(100);
        t.flow(&flow("10.0.0.1", "10.0.0.2", TLS, (3, 300), (2, 2000)));
        t.flow(&flow("10.0.0.1", "10.0.0.2", TLS, (1, 60), (0, 0)));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let ha = t.hosts.rows[&(a, TLS)];
        assert_eq!(
            (ha.sent, ha.received, ha.flows),
            (Traffic { packets: 4, bytes: 360 }, Traffic { packets: 2, bytes: 2000 }, 2)
        );
        assert_eq!(t.hosts.rows[&(b, TLS)].sent, Traffic { packets: 2, bytes: 2000 });
        assert_eq!(t.pairs.rows[&(a, b, TLS)], ProtoRow { traffic: Traffic { packets: 4, bytes: 360 }, flows: 2 });
        // The server sent nothing in the second flow: one flow in its direction.
        assert_eq!(t.pairs.rows[&(b, a, TLS)].flows, 1);
        // A host talking to itself: one row, its traffic both sent and received.
        t.flow(&flow("::1", "::1", UNKNOWN, (1, 100), (1, 100)));
        let lo: IpAddr = "::1".parse().unwrap();
        assert_eq!(t.hosts.rows[&(lo, UNKNOWN)].sent, Traffic { packets: 2, bytes: 200 });
        assert_eq!(t.hosts.rows[&(lo, UNKNOWN)].flows, 1);
    }

    #[test]
    fn the_directory_adds_up_from_leaves_to_root() {
        let mut t = AppTables::new(100);
        t.flow(&flow("10.0.0.1", "10.0.0.2", TLS, (3, 300), (2, 2000)));
        t.flow(&flow("10.0.0.1", "10.0.0.3", TLS_PORT, (1, 100), (1, 100)));
        t.flow(&flow("10.0.0.1", "10.0.0.3", UNKNOWN, (1, 40), (0, 0)));
        let mut udp = flow("2001:db8::1", "2001:db8::2", App { name: "dns", by_port: false }, (1, 80), (1, 120));
        udp.ip_protocol = 17;
        t.flow(&udp);
        let nodes = t.directory();
        let paths: Vec<_> = nodes.iter().map(|n| (n.path.as_str(), n.by_port)).collect();
        assert_eq!(
            paths,
            [
                ("ether2", false),
                ("ether2.ip", false),
                ("ether2.ip.tcp", false),
                ("ether2.ip.tcp.tls", false),
                ("ether2.ip.tcp.tls", true),
                ("ether2.ipv6", false),
                ("ether2.ipv6.udp", false),
                ("ether2.ipv6.udp.dns", false),
            ]
        );
        let node = |path: &str, by_port: bool| nodes.iter().find(|n| n.path == path && n.by_port == by_port).unwrap();
        assert_eq!(node("ether2", false).total, ProtoRow { traffic: Traffic { packets: 10, bytes: 2740 }, flows: 4 });
        let tcp = node("ether2.ip.tcp", false);
        assert_eq!(tcp.own, ProtoRow { traffic: Traffic { packets: 1, bytes: 40 }, flows: 1 });
        // Every node: total = its children's totals + its own.
        for n in &nodes {
            let mut sum = n.own;
            let depth = n.path.split('.').count();
            for c in nodes.iter().filter(|c| {
                c.path.split('.').count() == depth + 1
                    && c.path.starts_with(&n.path)
                    && c.path[n.path.len()..].starts_with('.')
            }) {
                sum.add(&c.total);
            }
            assert_eq!(sum, n.total, "{}", n.path);
        }
    }
}
