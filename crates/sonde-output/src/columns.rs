//! The columns of the flow logs: one table per protocol giving each field's name and how to
//! read it from a record. Names follow Tstat's log_tcp_complete/log_udp_complete where Tstat has
//! the same quantity (docs/metrics.md defines every one).

use std::net::IpAddr;

use sonde_flow::features::{FeaturesConfig, FlowFeatures, SpltPacket};
use sonde_flow::zeek::{udp_history, ConnState};
use sonde_flow::{FlowOwners, IcmpErrors, IcmpKind, IcmpRecord, Owner, TcpDirStats, TcpRecord, UdpDirStats, UdpRecord};
use sonde_l7::{Facts, TlsFacts};

/// One field value, formatted the same way in every output format.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Int(u64),
    /// A duration or time given in nanoseconds, printed in milliseconds with 3 decimals (µs,
    /// rounded half up), by integer arithmetic so the text never depends on float formatting.
    Ms(u64),
    Ip(IpAddr),
    Text(&'static str),
    /// A text read from the traffic (a server name, a host header): escaped where the format
    /// needs it (TSV: backslash, tab, newline and carriage return as `\\`, `\t`, `\n`, `\r`).
    Str(&'a str),
    /// A text made from the record (a list): escaped as `Str`.
    Owned(String),
    /// The flow's Community ID (plain ASCII: never escaped).
    Id(sonde_l7::CommunityId),
    /// The flow's Zeek-style UID (plain ASCII: never escaped).
    Uid(sonde_l7::Uid),
    Bool(bool),
    /// A number that is not a whole one (a mean): the shortest decimal that reads back as the
    /// same double (Rust's `Display`), in every text format.
    Float(f64),
    /// A list of integers (the SPLT): `1,-1` in TSV, `[1,-1]` in JSON.
    List(Vec<i64>),
    /// No value (e.g. no handshake seen): `-` in TSV, `null` in JSON.
    Missing,
    /// A metric without a sample (no RTT sample, an event that never happened): Tstat's `0` in
    /// TSV, `null` in JSON and the typed outputs.
    NoSample,
}

/// What a column holds, for the typed outputs (Parquet, Arrow, Python): the kinds the interval
/// and definition tables use too.
pub use sonde_types::table::Kind;

pub struct Column<R> {
    pub name: &'static str,
    pub kind: Kind,
    pub value: fn(&R) -> Value<'_>,
}

/// What reads a log's columns: given each column's name, kind and value function in output
/// order, by [`Logged::columns`].
pub trait Visit<R> {
    fn column(&mut self, name: &'static str, kind: Kind, value: fn(&R) -> Value<'_>);
}

/// A record a flow log shows, with the log's columns: the one definition of their names,
/// kinds and values, which every format reads.
///
/// The definition is a sequence of [`Visit::column`] calls, always inlined: a visitor whose
/// `column` is inlined too (the line writer's) sees each value function as a constant, so the
/// compiler calls it directly, inlines it and writes the field from the record's own field
/// (no call through a pointer and no [`Value`] left in memory). [`collect`] makes the list of
/// [`Column`]s the typed outputs iterate.
pub trait Logged: Sized {
    fn columns<V: Visit<Self>>(v: &mut V);
}

/// The columns of `R`'s log, in output order.
pub fn collect<R: Logged>() -> Vec<Column<R>> {
    struct List<R>(Vec<Column<R>>);
    impl<R> Visit<R> for List<R> {
        fn column(&mut self, name: &'static str, kind: Kind, value: fn(&R) -> Value<'_>) {
            self.0.push(Column { name, kind, value });
        }
    }
    let mut list = List(Vec::new());
    R::columns(&mut list);
    list.0
}

fn ms(ns: u64) -> Value<'static> {
    Value::Ms(ns)
}

/// A mean or deviation in (fractional) nanoseconds.
fn ms_f(ns: f64) -> Value<'static> {
    Value::Ms(if ns.is_finite() && ns > 0.0 { ns.round() as u64 } else { 0 })
}

/// An RTT statistic, without a sample when fewer than `least` samples were taken.
fn rtt(samples: u64, least: u64, value: Value<'static>) -> Value<'static> {
    if samples < least {
        Value::NoSample
    } else {
        value
    }
}

/// A time relative to the flow's first packet; no sample when the event never happened
/// (Tstat's 0).
fn rel(t_ns: u64, first_ns: u64) -> Value<'static> {
    if t_ns == 0 {
        Value::NoSample
    } else {
        ms(t_ns.saturating_sub(first_ns))
    }
}

/// A value measured on packets of one direction: no sample when there were none.
fn seen(pkts: u64, value: u64) -> Value<'static> {
    if pkts == 0 {
        Value::NoSample
    } else {
        Value::Int(value)
    }
}

fn opt_ms(v: Option<u64>) -> Value<'static> {
    v.map_or(Value::Missing, ms)
}

/// The ICMP errors that quoted a flow's packets: how many, and the latest's type and code.
macro_rules! icmp_error_columns {
    ($v:ident) => {
        $v.column("icmp_errors", Kind::Count, |r| Value::Int(r.icmp_errors.count));
        $v.column("icmp_error_last", Kind::Label, |r| icmp_error_last(r.icmp_errors));
    };
}

/// Who each end belongs to (`--geoip`, `--asn`): missing when no database was given or it
/// does not know the address.
macro_rules! owner_columns {
    ($v:ident) => {
        $v.column("c_country", Kind::Label, |r| text(owner(&r.owners, 0).and_then(Owner::country_code)));
        $v.column("s_country", Kind::Label, |r| text(owner(&r.owners, 1).and_then(Owner::country_code)));
        $v.column("c_asn", Kind::Count, |r| asn(owner(&r.owners, 0)));
        $v.column("s_asn", Kind::Count, |r| asn(owner(&r.owners, 1)));
        $v.column("c_as_org", Kind::Label, |r| text(owner(&r.owners, 0).and_then(|o| o.as_org.as_deref())));
        $v.column("s_as_org", Kind::Label, |r| text(owner(&r.owners, 1).and_then(|o| o.as_org.as_deref())));
    };
}

/// The owner of a flow's client (0) or server (1), when owners were looked up.
fn owner(owners: &Option<Box<FlowOwners>>, side: usize) -> Option<&Owner> {
    owners.as_deref().map(|o| &o[side])
}

fn asn(owner: Option<&Owner>) -> Value<'static> {
    owner.and_then(|o| o.asn).map_or(Value::Missing, |n| Value::Int(u64::from(n)))
}

macro_rules! tcp_dir_columns {
    ($v:ident, $p:literal, $side:ident) => {
        $v.column(concat!($p, "_pkts_all"), Kind::Count, |r| Value::Int(r.$side.pkts));
        $v.column(concat!($p, "_rst_cnt"), Kind::Count, |r| Value::Int(r.$side.rst_cnt));
        $v.column(concat!($p, "_ack_cnt"), Kind::Count, |r| Value::Int(r.$side.ack_pkts));
        $v.column(concat!($p, "_ack_cnt_p"), Kind::Count, |r| Value::Int(r.$side.pure_ack_pkts));
        $v.column(concat!($p, "_bytes_uniq"), Kind::Count, |r| Value::Int(r.$side.unique_bytes));
        $v.column(concat!($p, "_pkts_data"), Kind::Count, |r| Value::Int(r.$side.data_pkts));
        $v.column(concat!($p, "_bytes_all"), Kind::Count, |r| Value::Int(r.$side.payload_bytes));
        $v.column(concat!($p, "_pkts_retx"), Kind::Count, |r| Value::Int(r.$side.retx_pkts));
        $v.column(concat!($p, "_bytes_retx"), Kind::Count, |r| Value::Int(r.$side.retx_bytes));
        $v.column(concat!($p, "_pkts_ooo"), Kind::Count, |r| Value::Int(r.$side.ooo_pkts));
        $v.column(concat!($p, "_syn_cnt"), Kind::Count, |r| Value::Int(r.$side.syn_cnt));
        $v.column(concat!($p, "_fin_cnt"), Kind::Count, |r| Value::Int(r.$side.fin_cnt));
    };
}

macro_rules! tcp_dir_rtt_columns {
    ($v:ident, $p:literal, $side:ident) => {
        $v.column(concat!($p, "_rtt_avg"), Kind::Duration, |r| rtt(r.$side.rtt.count, 1, ms_f(r.$side.rtt.mean_ns())));
        $v.column(concat!($p, "_rtt_min"), Kind::Duration, |r| rtt(r.$side.rtt.count, 1, ms(r.$side.rtt.min_ns)));
        $v.column(concat!($p, "_rtt_max"), Kind::Duration, |r| rtt(r.$side.rtt.count, 1, ms(r.$side.rtt.max_ns)));
        $v.column(concat!($p, "_rtt_std"), Kind::Duration, |r| rtt(r.$side.rtt.count, 2, ms_f(r.$side.rtt.stdev_ns())));
        $v.column(concat!($p, "_rtt_cnt"), Kind::Count, |r| Value::Int(r.$side.rtt.count));
        $v.column(concat!($p, "_ttl_min"), Kind::Count, |r| seen(r.$side.pkts, u64::from(r.$side.ttl_min)));
        $v.column(concat!($p, "_ttl_max"), Kind::Count, |r| seen(r.$side.pkts, u64::from(r.$side.ttl_max)));
    };
}

macro_rules! tcp_dir_option_columns {
    ($v:ident, $p:literal, $side:ident) => {
        $v.column(concat!($p, "_f1323_opt"), Kind::Flag, |r| Value::Bool(r.$side.win_scale.is_some()));
        $v.column(concat!($p, "_tm_opt"), Kind::Flag, |r| Value::Bool(r.$side.timestamps));
        $v.column(concat!($p, "_win_scl"), Kind::Count, |r| {
            r.$side.win_scale.map_or(Value::NoSample, |s| Value::Int(u64::from(s)))
        });
        $v.column(concat!($p, "_sack_opt"), Kind::Flag, |r| Value::Bool(r.$side.sack_permitted));
        $v.column(concat!($p, "_sack_cnt"), Kind::Count, |r| Value::Int(r.$side.sack_blocks));
        $v.column(concat!($p, "_mss"), Kind::Count, |r| {
            if r.$side.mss_opt == 0 {
                Value::NoSample
            } else {
                Value::Int(u64::from(r.$side.mss_opt))
            }
        });
        $v.column(concat!($p, "_mss_max"), Kind::Count, |r| seen(r.$side.data_pkts, u64::from(r.$side.seg_max)));
        $v.column(concat!($p, "_mss_min"), Kind::Count, |r| seen(r.$side.data_pkts, u64::from(r.$side.seg_min)));
        $v.column(concat!($p, "_win_max"), Kind::Count, |r| seen(r.$side.pkts, r.$side.win_max));
        $v.column(concat!($p, "_win_min"), Kind::Count, |r| seen(r.$side.pkts, r.$side.win_min));
        $v.column(concat!($p, "_win_0"), Kind::Count, |r| Value::Int(r.$side.win_zero));
        $v.column(concat!($p, "_cwin_max"), Kind::Count, |r| Value::Int(r.$side.inflight_max));
        $v.column(concat!($p, "_cwin_min"), Kind::Count, |r| Value::Int(r.$side.inflight_min));
        $v.column(concat!($p, "_cwin_ini"), Kind::Count, |r| Value::Int(r.$side.inflight_initial));
        $v.column(concat!($p, "_pkts_rto"), Kind::Count, |r| Value::Int(r.$side.anomalies.rto));
        $v.column(concat!($p, "_pkts_fs"), Kind::Count, |r| Value::Int(r.$side.anomalies.fast_retx));
        $v.column(concat!($p, "_pkts_reor"), Kind::Count, |r| Value::Int(r.$side.anomalies.reordering));
        $v.column(concat!($p, "_pkts_dup"), Kind::Count, |r| Value::Int(r.$side.anomalies.net_dup));
        $v.column(concat!($p, "_pkts_unk"), Kind::Count, |r| Value::Int(r.$side.anomalies.unknown));
        $v.column(concat!($p, "_pkts_fc"), Kind::Count, |r| Value::Int(r.$side.anomalies.flow_control));
        $v.column(concat!($p, "_pkts_unrto"), Kind::Count, |r| Value::Int(r.$side.anomalies.unneeded_rto));
        $v.column(concat!($p, "_pkts_unfs"), Kind::Count, |r| Value::Int(r.$side.anomalies.unneeded_fast_retx));
        $v.column(concat!($p, "_syn_retx"), Kind::Count, |r| Value::Int(r.$side.syn_retx_new_isn));
    };
}

macro_rules! tcp_dir_extra_columns {
    ($v:ident, $p:literal, $side:ident) => {
        $v.column(concat!($p, "_bytes_ip"), Kind::Count, |r| Value::Int(r.$side.ip_bytes));
        $v.column(concat!($p, "_first_pkt"), Kind::Duration, |r| rel(r.$side.first_ns, r.first_ns));
        $v.column(concat!($p, "_last_pkt"), Kind::Duration, |r| rel(r.$side.last_ns, r.first_ns));
    };
}

fn dir_first(d: &TcpDirStats, first_ns: u64) -> Value<'static> {
    rel(d.first_payload_ns, first_ns)
}

/// The TCP flow log's columns, in output order.
pub fn tcp_columns() -> Vec<Column<TcpRecord>> {
    collect()
}

impl Logged for TcpRecord {
    #[inline(always)]
    fn columns<V: Visit<TcpRecord>>(v: &mut V) {
        v.column("c_ip", Kind::Address, |r| Value::Ip(r.endpoints.client_ip));
        v.column("c_port", Kind::Count, |r| Value::Int(u64::from(r.endpoints.client_port)));
        tcp_dir_columns!(v, "c", client);
        v.column("s_ip", Kind::Address, |r| Value::Ip(r.endpoints.server_ip));
        v.column("s_port", Kind::Count, |r| Value::Int(u64::from(r.endpoints.server_port)));
        tcp_dir_columns!(v, "s", server);
        v.column("first", Kind::Time, |r| ms(r.first_ns));
        v.column("last", Kind::Time, |r| ms(r.last_ns));
        v.column("durat", Kind::Duration, |r| ms(r.last_ns.saturating_sub(r.first_ns)));
        v.column("c_first", Kind::Duration, |r| dir_first(&r.client, r.first_ns));
        v.column("s_first", Kind::Duration, |r| dir_first(&r.server, r.first_ns));
        v.column("c_last", Kind::Duration, |r| rel(r.client.last_payload_ns, r.first_ns));
        v.column("s_last", Kind::Duration, |r| rel(r.server.last_payload_ns, r.first_ns));
        v.column("c_first_ack", Kind::Duration, |r| rel(r.client.first_ack_ns, r.first_ns));
        v.column("s_first_ack", Kind::Duration, |r| rel(r.server.first_ack_ns, r.first_ns));
        v.column("c_isint", Kind::Flag, |r| Value::Bool(r.endpoints.client_internal));
        v.column("s_isint", Kind::Flag, |r| Value::Bool(r.endpoints.server_internal));
        v.column("c_iscrypto", Kind::Flag, |_| Value::Bool(false));
        v.column("s_iscrypto", Kind::Flag, |_| Value::Bool(false));
        tcp_dir_rtt_columns!(v, "c", client);
        tcp_dir_rtt_columns!(v, "s", server);
        tcp_dir_option_columns!(v, "c", client);
        tcp_dir_option_columns!(v, "s", server);
        // sonde's own columns, after Tstat's.
        tcp_dir_extra_columns!(v, "c", client);
        tcp_dir_extra_columns!(v, "s", server);
        v.column("c_hs_rtt", Kind::Duration, |r| opt_ms(r.hs_syn_synack_ns));
        v.column("s_hs_rtt", Kind::Duration, |r| opt_ms(r.hs_synack_ack_ns));
        v.column("complete", Kind::Flag, |r| Value::Bool(r.complete));
        v.column("end_reason", Kind::Label, |r| Value::Text(r.end.name()));
        v.column("conn_state", Kind::Label, |r| r.zeek.map_or(Value::Missing, |z| Value::Text(z.state.name())));
        v.column("history", Kind::Label, |r| {
            r.zeek.as_ref().map_or(Value::Missing, |z| Value::Str(z.history.as_str()))
        });
        v.column("tunnel", Kind::Label, |r| r.endpoints.tunnel.map_or(Value::Missing, |t| Value::Text(t.name())));
        tcp_app_columns(v);
        icmp_error_columns!(v);
        owner_columns!(v);
    }
}

macro_rules! udp_dir_columns {
    ($v:ident, $p:literal, $side:ident, $ip:ident, $port:ident, $int:ident) => {
        $v.column(concat!($p, "_ip"), Kind::Address, |r| Value::Ip(r.endpoints.$ip));
        $v.column(concat!($p, "_port"), Kind::Count, |r| Value::Int(u64::from(r.endpoints.$port)));
        $v.column(concat!($p, "_first_abs"), Kind::Time, |r| udp_first_abs(&r.$side));
        $v.column(concat!($p, "_durat"), Kind::Duration, |r| udp_durat(&r.$side));
        $v.column(concat!($p, "_bytes_all"), Kind::Count, |r| Value::Int(r.$side.payload_bytes));
        $v.column(concat!($p, "_pkts_all"), Kind::Count, |r| Value::Int(r.$side.pkts));
        $v.column(concat!($p, "_isint"), Kind::Flag, |r| Value::Bool(r.endpoints.$int));
        $v.column(concat!($p, "_iscrypto"), Kind::Flag, |_| Value::Bool(false));
    };
}

/// When a UDP direction first sent, if it did.
fn sent_at(d: &UdpDirStats) -> Option<u64> {
    (d.pkts > 0).then_some(d.first_ns)
}

fn udp_first_abs(d: &UdpDirStats) -> Value<'static> {
    if d.pkts == 0 {
        Value::NoSample
    } else {
        ms(d.first_ns)
    }
}

fn udp_durat(d: &UdpDirStats) -> Value<'static> {
    if d.pkts == 0 {
        Value::NoSample
    } else {
        ms(d.last_ns.saturating_sub(d.first_ns))
    }
}

/// A text read from the traffic, or missing.
fn text(s: Option<&str>) -> Value<'_> {
    s.map_or(Value::Missing, Value::Str)
}

/// The name of a TLS version (`TLSv1.3`), or its number in hex.
fn tls_version(v: Option<u16>) -> Value<'static> {
    match v {
        None => Value::Missing,
        Some(0x0300) => Value::Text("SSLv3"),
        Some(0x0301) => Value::Text("TLSv1.0"),
        Some(0x0302) => Value::Text("TLSv1.1"),
        Some(0x0303) => Value::Text("TLSv1.2"),
        Some(0x0304) => Value::Text("TLSv1.3"),
        Some(v) => Value::Owned(format!("0x{v:04x}")),
    }
}

/// The highest version a ClientHello offered (supported_versions, else its legacy version).
fn offered_version(t: &TlsFacts) -> Option<u16> {
    t.versions_offered.iter().copied().max().or(t.client_version)
}

/// Addresses as the logs spell them, joined by commas (without the `fmt` machinery).
fn addresses(list: &[IpAddr]) -> String {
    let mut out = String::with_capacity(list.len() * 16);
    let mut buf: crate::line::IpBuf = [0; sonde_types::text::IP_MAX];
    for (i, &ip) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(crate::line::ip_text(ip, &mut buf));
    }
    out
}

/// Names joined by commas (ALPN lists); missing when none.
fn joined(names: &[Box<str>]) -> Value<'static> {
    if names.is_empty() {
        Value::Missing
    } else {
        Value::Owned(names.join(","))
    }
}

/// A QUIC version in hex (`0x00000001`).
fn quic_version(v: Option<u32>) -> Value<'static> {
    v.map_or(Value::Missing, |v| Value::Owned(format!("0x{v:08x}")))
}

/// A packet time of the application layer, relative to the flow's first packet.
fn app_rel(t_ns: Option<u64>, first_ns: u64) -> Value<'static> {
    t_ns.map_or(Value::Missing, |t| ms(t.saturating_sub(first_ns)))
}

fn app_label(facts: Option<&Facts>, transport: sonde_l7::Transport, e: &sonde_flow::Endpoints) -> sonde_l7::Label {
    static EMPTY: std::sync::OnceLock<Facts> = std::sync::OnceLock::new();
    let facts = facts.unwrap_or_else(|| EMPTY.get_or_init(Facts::default));
    sonde_l7::label(facts, transport, e.client_port, e.server_port)
}

/// The Community ID of a flow: the last one worked out in this thread is kept, so that every
/// sink showing the same record (the flow logs, Kafka, Parquet) hashes it once.
fn flow_id(protocol: u8, e: &sonde_flow::Endpoints) -> sonde_l7::CommunityId {
    type Flow = (u8, (IpAddr, u16), (IpAddr, u16));
    thread_local! {
        static LAST: std::cell::Cell<Option<(Flow, sonde_l7::CommunityId)>> = const { std::cell::Cell::new(None) };
    }
    let flow = (protocol, (e.client_ip, e.client_port), (e.server_ip, e.server_port));
    LAST.with(|last| match last.get() {
        Some((seen, id)) if seen == flow => id,
        _ => {
            let id = sonde_l7::community_id(protocol, flow.1, flow.2, 0);
            last.set(Some((flow, id)));
            id
        }
    })
}

fn community_id(protocol: u8, e: &sonde_flow::Endpoints) -> Value<'static> {
    Value::Id(flow_id(protocol, e))
}

/// The Zeek-style UID of a flow: its Community ID's and first time's (a hash cheaper than the
/// cache `flow_id` keeps).
fn uid(protocol: u8, e: &sonde_flow::Endpoints, first_ns: u64) -> Value<'static> {
    Value::Uid(sonde_l7::uid(&flow_id(protocol, e), first_ns))
}

/// Columns both flow logs end with: the application, its Community ID, DN-Hunter's name and
/// the DNS facts (docs/l7.md).
macro_rules! app_columns {
    ($v:ident, $transport:expr, $protocol:literal) => {
        $v.column("app", Kind::Label, |r| Value::Text(app_label(r.app.as_deref(), $transport, &r.endpoints).name));
        $v.column("app_by_port", Kind::Flag, |r| {
            Value::Bool(app_label(r.app.as_deref(), $transport, &r.endpoints).by_port)
        });
        $v.column("community_id", Kind::Label, |r| community_id($protocol, &r.endpoints));
        $v.column("uid", Kind::Label, |r| uid($protocol, &r.endpoints, r.first_ns));
        $v.column("fqdn", Kind::Label, |r| text(r.app.as_ref().and_then(|a| a.resolved.as_ref()).map(|d| &*d.name)));
        $v.column("dns_rslv", Kind::Address, |r| {
            r.app.as_ref().and_then(|a| a.resolved.as_ref()).map_or(Value::Missing, |d| Value::Ip(d.resolver))
        });
        $v.column("dns_qry", Kind::Label, |r| {
            text(r.app.as_ref().and_then(|a| a.dns.as_ref()).and_then(|d| d.query.as_deref()))
        });
        $v.column("dns_qtype", Kind::Count, |r| {
            r.app.as_ref().and_then(|a| a.dns.as_ref()?.qtype).map_or(Value::Missing, |t| Value::Int(u64::from(t)))
        });
        $v.column("dns_rcode", Kind::Count, |r| {
            r.app.as_ref().and_then(|a| a.dns.as_ref()?.rcode).map_or(Value::Missing, |c| Value::Int(u64::from(c)))
        });
        $v.column("dns_answers", Kind::Label, |r| match r.app.as_ref().and_then(|a| a.dns.as_ref()) {
            Some(d) if !d.answers.is_empty() => Value::Owned(addresses(&d.answers)),
            _ => Value::Missing,
        });
    };
}

fn tls_of(r: &TcpRecord) -> Option<&TlsFacts> {
    r.app.as_ref()?.tls.as_deref()
}

fn http_of(r: &TcpRecord) -> Option<&sonde_l7::HttpFacts> {
    r.app.as_ref()?.http.as_deref()
}

fn quic_of(r: &UdpRecord) -> Option<&sonde_l7::QuicFacts> {
    r.app.as_ref()?.quic.as_deref()
}

macro_rules! tls_dir_columns {
    ($v:ident, $p:literal, $dir:literal) => {
        $v.column(concat!($p, "_last_handshakeT"), Kind::Duration, |r| {
            app_rel(tls_of(r).and_then(|t| t.last_handshake_ns[$dir]), r.first_ns)
        });
        $v.column(concat!($p, "_appdataT"), Kind::Duration, |r| {
            app_rel(tls_of(r).and_then(|t| t.first_appdata_ns[$dir]), r.first_ns)
        });
        $v.column(concat!($p, "_appdataB"), Kind::Count, |r| {
            tls_of(r).map_or(Value::Missing, |t| Value::Int(t.appdata_bytes[$dir]))
        });
    };
}

/// The TCP flow log's layer-7 columns (Tstat's names where Tstat has the quantity).
#[inline(always)]
fn tcp_app_columns<V: Visit<TcpRecord>>(v: &mut V) {
    app_columns!(v, sonde_l7::Transport::Tcp, 6);
    v.column("c_tls_SNI", Kind::Label, |r| text(tls_of(r).and_then(|t| t.sni.as_deref())));
    v.column("s_tls_SCN", Kind::Label, |r| text(tls_of(r).and_then(|t| t.cert_subject.as_deref())));
    v.column("c_npnalpn", Kind::Label, |r| tls_of(r).map_or(Value::Missing, |t| joined(&t.alpn_offered)));
    v.column("s_npnalpn", Kind::Label, |r| text(tls_of(r).and_then(|t| t.alpn.as_deref())));
    v.column("c_TLSvers", Kind::Label, |r| tls_version(tls_of(r).and_then(offered_version)));
    v.column("s_TLSvers", Kind::Label, |r| tls_version(tls_of(r).and_then(|t| t.version)));
    v.column("tls_ja3", Kind::Label, |r| text(tls_of(r).and_then(|t| t.ja3.as_deref())));
    v.column("tls_ja3s", Kind::Label, |r| text(tls_of(r).and_then(|t| t.ja3s.as_deref())));
    v.column("tls_ja4", Kind::Label, |r| text(tls_of(r).and_then(|t| t.ja4.as_deref())));
    tls_dir_columns!(v, "c", 0);
    tls_dir_columns!(v, "s", 1);
    v.column("http_req_cnt", Kind::Count, |r| http_of(r).map_or(Value::Missing, |h| Value::Int(u64::from(h.requests))));
    v.column("http_res_cnt", Kind::Count, |r| {
        http_of(r).map_or(Value::Missing, |h| Value::Int(u64::from(h.responses)))
    });
    v.column("http_res", Kind::Count, |r| {
        http_of(r).and_then(|h| h.status).map_or(Value::Missing, |s| Value::Int(u64::from(s)))
    });
    v.column("http_method", Kind::Label, |r| text(http_of(r).and_then(|h| h.method.as_deref())));
    v.column("http_hostname", Kind::Label, |r| text(http_of(r).and_then(|h| h.host.as_deref())));
    v.column("http_ua", Kind::Label, |r| text(http_of(r).and_then(|h| h.user_agent.as_deref())));
}

fn rtp_of(r: &UdpRecord, dir: usize) -> Option<&sonde_l7::RtpStream> {
    r.app.as_ref()?.rtp.as_ref()?.dirs.get(dir)?.as_ref()
}

/// An RTP jitter in timestamp units as a duration (by the payload type's clock); missing when
/// the clock is not known (a dynamic payload type).
fn rtp_jitter(s: Option<&sonde_l7::RtpStream>, units: fn(&sonde_l7::RtpStream) -> f64) -> Value<'static> {
    match s {
        Some(s) if s.clock_hz > 0 => ms_f(units(s) * 1e9 / f64::from(s.clock_hz)),
        _ => Value::Missing,
    }
}

macro_rules! rtp_dir_columns {
    ($v:ident, $p:literal, $dir:literal) => {
        $v.column(concat!($p, "_rtp_ssrc"), Kind::Count, |r| {
            rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(u64::from(s.ssrc)))
        });
        $v.column(concat!($p, "_rtp_pt"), Kind::Count, |r| {
            rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(u64::from(s.payload_type)))
        });
        $v.column(concat!($p, "_rtp_pkts"), Kind::Count, |r| {
            rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.packets))
        });
        $v.column(concat!($p, "_rtp_lost"), Kind::Count, |r| {
            rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.lost.max(0) as u64))
        });
        $v.column(concat!($p, "_rtp_oos"), Kind::Count, |r| {
            rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.out_of_sequence))
        });
        $v.column(concat!($p, "_rtp_dup"), Kind::Count, |r| {
            rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.duplicates))
        });
        $v.column(concat!($p, "_rtp_jitter_avg"), Kind::Duration, |r| rtp_jitter(rtp_of(r, $dir), |s| s.jitter_mean));
        $v.column(concat!($p, "_rtp_jitter_max"), Kind::Duration, |r| rtp_jitter(rtp_of(r, $dir), |s| s.jitter_max));
        $v.column(concat!($p, "_rtcp_pkts"), Kind::Count, |r| {
            r.app.as_ref().and_then(|a| a.rtp.as_ref()).map_or(Value::Missing, |rtp| Value::Int(rtp.rtcp[$dir].packets))
        });
    };
}

/// The UDP flow log's layer-7 columns (Tstat's names where Tstat has the quantity).
#[inline(always)]
fn udp_app_columns<V: Visit<UdpRecord>>(v: &mut V) {
    app_columns!(v, sonde_l7::Transport::Udp, 17);
    v.column("quic_SNI", Kind::Label, |r| text(quic_of(r).and_then(|q| q.tls.sni.as_deref())));
    v.column("quic_UA", Kind::Label, |r| text(quic_of(r).and_then(|q| q.user_agent.as_deref())));
    v.column("quic_c_vers", Kind::Label, |r| quic_version(quic_of(r).and_then(|q| q.client_version)));
    v.column("quic_s_vers", Kind::Label, |r| quic_version(quic_of(r).and_then(|q| q.server_version)));
    v.column("quic_zero_rtt", Kind::Flag, |r| quic_of(r).map_or(Value::Missing, |q| Value::Bool(q.zero_rtt)));
    v.column("quic_ech", Kind::Flag, |r| quic_of(r).map_or(Value::Missing, |q| Value::Bool(q.ech)));
    v.column("quic_alpn", Kind::Label, |r| quic_of(r).map_or(Value::Missing, |q| joined(&q.tls.alpn_offered)));
    v.column("quic_ja4", Kind::Label, |r| text(quic_of(r).and_then(|q| q.tls.ja4.as_deref())));
    rtp_dir_columns!(v, "c", 0);
    rtp_dir_columns!(v, "s", 1);
}

/// `columns` with `*_iscrypto` set to 1, as Tstat sets it for an address it anonymised: for the
/// logs of a run whose every address went through the anonymizer.
pub fn mark_anonymized<R>(mut columns: Vec<Column<R>>) -> Vec<Column<R>> {
    for c in columns.iter_mut().filter(|c| c.name.ends_with("_iscrypto")) {
        c.value = |_| Value::Bool(true);
    }
    columns
}

/// The UDP flow log's columns, in output order.
pub fn udp_columns() -> Vec<Column<UdpRecord>> {
    collect()
}

impl Logged for UdpRecord {
    #[inline(always)]
    fn columns<V: Visit<UdpRecord>>(v: &mut V) {
        udp_dir_columns!(v, "c", client, client_ip, client_port, client_internal);
        udp_dir_columns!(v, "s", server, server_ip, server_port, server_internal);
        v.column("c_bytes_ip", Kind::Count, |r| Value::Int(r.client.ip_bytes));
        v.column("s_bytes_ip", Kind::Count, |r| Value::Int(r.server.ip_bytes));
        v.column("first", Kind::Time, |r| ms(r.first_ns));
        v.column("last", Kind::Time, |r| ms(r.last_ns));
        v.column("durat", Kind::Duration, |r| ms(r.last_ns.saturating_sub(r.first_ns)));
        v.column("end_reason", Kind::Label, |r| Value::Text(r.end.name()));
        v.column("conn_state", Kind::Label, |r| {
            Value::Text(ConnState::udp(r.client.pkts > 0, r.server.pkts > 0).name())
        });
        v.column("history", Kind::Label, |r| Value::Text(udp_history(sent_at(&r.client), sent_at(&r.server))));
        v.column("tunnel", Kind::Label, |r| r.endpoints.tunnel.map_or(Value::Missing, |t| Value::Text(t.name())));
        udp_app_columns(v);
        icmp_error_columns!(v);
        owner_columns!(v);
    }
}

/// A record that may carry NFStream's flow features.
pub trait Featured {
    fn flow_features(&self) -> Option<&FlowFeatures>;
}

impl Featured for TcpRecord {
    fn flow_features(&self) -> Option<&FlowFeatures> {
        self.features.as_deref()
    }
}

impl Featured for UdpRecord {
    fn flow_features(&self) -> Option<&FlowFeatures> {
        self.features.as_deref()
    }
}

/// A feature of `r`, missing when the record has none (the option was off for it).
#[inline]
fn feature<R: Featured>(r: &R, value: impl Fn(&FlowFeatures) -> Value<'static>) -> Value<'static> {
    r.flow_features().map_or(Value::Missing, value)
}

/// The columns of NFStream's flow features (`--features ml`, docs/features.md), in NFStream's
/// names and order, after the log's own: the statistics, then (with a SPLT) its three lists.
pub fn feature_columns<R: Featured>(cfg: FeaturesConfig) -> Vec<Column<R>> {
    let mut c: Vec<Column<R>> = Vec::new();
    let mut col = |name: &'static str, kind: Kind, value: fn(&R) -> Value<'_>| c.push(Column { name, kind, value });
    col("src_is_client", Kind::Flag, |r| feature(r, |f| Value::Bool(f.src_is_client)));
    macro_rules! dir_columns {
        ($d:literal, $i:literal) => {
            col(concat!($d, "_packets"), Kind::Count, |r| feature(r, |f| Value::Int(f.ps[$i].n)));
        };
    }
    dir_columns!("bidirectional", 0);
    dir_columns!("src2dst", 1);
    dir_columns!("dst2src", 2);
    macro_rules! stat_columns {
        ($d:literal, $i:literal, $field:ident, $unit:literal) => {
            col(concat!($d, "_min_", $unit), Kind::Count, |r| feature(r, |f| Value::Int(f.$field[$i].min)));
            col(concat!($d, "_mean_", $unit), Kind::Float, |r| feature(r, |f| Value::Float(f.$field[$i].mean)));
            col(concat!($d, "_stddev_", $unit), Kind::Float, |r| feature(r, |f| Value::Float(f.$field[$i].stddev())));
            col(concat!($d, "_max_", $unit), Kind::Count, |r| feature(r, |f| Value::Int(f.$field[$i].max)));
        };
    }
    stat_columns!("bidirectional", 0, ps, "ps");
    stat_columns!("src2dst", 1, ps, "ps");
    stat_columns!("dst2src", 2, ps, "ps");
    stat_columns!("bidirectional", 0, piat, "piat_ms");
    stat_columns!("src2dst", 1, piat, "piat_ms");
    stat_columns!("dst2src", 2, piat, "piat_ms");
    macro_rules! flag_columns {
        ($d:literal, $i:literal) => {
            flag_columns!($d, $i, 0, "syn");
            flag_columns!($d, $i, 1, "cwr");
            flag_columns!($d, $i, 2, "ece");
            flag_columns!($d, $i, 3, "urg");
            flag_columns!($d, $i, 4, "ack");
            flag_columns!($d, $i, 5, "psh");
            flag_columns!($d, $i, 6, "rst");
            flag_columns!($d, $i, 7, "fin");
        };
        ($d:literal, $i:literal, $f:literal, $name:literal) => {
            col(concat!($d, "_", $name, "_packets"), Kind::Count, |r| feature(r, |f| Value::Int(f.flags[$i][$f])));
        };
    }
    flag_columns!("bidirectional", 0);
    flag_columns!("src2dst", 1);
    flag_columns!("dst2src", 2);
    if cfg.splt > 0 {
        col("splt_direction", Kind::List, |r| feature(r, |f| Value::List(f.splt_list(|p| i64::from(p.direction)))));
        col("splt_ps", Kind::List, |r| feature(r, |f| Value::List(f.splt_list(|p| i64::from(p.size)))));
        col("splt_piat_ms", Kind::List, |r| feature(r, |f| Value::List(f.splt_list(splt_piat))));
    }
    c
}

/// A SPLT gap in ms (a gap past i64's range, which no trace has, saturates).
fn splt_piat(p: &SpltPacket) -> i64 {
    i64::try_from(p.piat_ms).unwrap_or(i64::MAX)
}

/// The TCP flow log's columns with the flow features' after them when asked for.
pub fn tcp_columns_with(features: Option<FeaturesConfig>) -> Vec<Column<TcpRecord>> {
    let mut columns = tcp_columns();
    columns.extend(features.map(feature_columns).unwrap_or_default());
    columns
}

/// The UDP flow log's columns with the flow features' after them when asked for.
pub fn udp_columns_with(features: Option<FeaturesConfig>) -> Vec<Column<UdpRecord>> {
    let mut columns = udp_columns();
    columns.extend(features.map(feature_columns).unwrap_or_default());
    columns
}

/// `type/code`, e.g. `3/3` (port unreachable); missing without an error.
fn icmp_error_last(e: IcmpErrors) -> Value<'static> {
    e.last.map_or(Value::Missing, |(t, c)| Value::Owned(format!("{t}/{c}")))
}

/// An ICMP record's statistic that exists only for echo sessions.
fn echo_only(r: &IcmpRecord, value: Value<'static>) -> Value<'static> {
    match r.key.kind {
        IcmpKind::Echo { .. } => value,
        IcmpKind::Message { .. } => Value::Missing,
    }
}

/// An echo RTT statistic: missing for other messages, no sample below `least` samples.
fn echo_rtt(r: &IcmpRecord, least: u64, value: Value<'static>) -> Value<'static> {
    echo_only(r, rtt(r.rtt.count, least, value))
}

/// The ICMP flow log's columns, in output order (docs/icmp.md).
pub fn icmp_columns() -> Vec<Column<IcmpRecord>> {
    collect()
}

impl Logged for IcmpRecord {
    #[inline(always)]
    fn columns<V: Visit<IcmpRecord>>(v: &mut V) {
        v.column("c_ip", Kind::Address, |r| Value::Ip(r.key.client));
        v.column("s_ip", Kind::Address, |r| Value::Ip(r.key.server));
        v.column("proto", Kind::Label, |r| Value::Text(r.key.proto()));
        v.column("kind", Kind::Label, |r| {
            Value::Text(match r.key.kind {
                IcmpKind::Echo { .. } => "echo",
                IcmpKind::Message { .. } => "message",
            })
        });
        v.column("icmp_type", Kind::Count, |r| match r.key.kind {
            IcmpKind::Message { icmp_type, .. } => Value::Int(u64::from(icmp_type)),
            IcmpKind::Echo { .. } => Value::Missing,
        });
        v.column("icmp_code", Kind::Count, |r| match r.key.kind {
            IcmpKind::Message { code, .. } => Value::Int(u64::from(code)),
            IcmpKind::Echo { .. } => Value::Missing,
        });
        v.column("echo_id", Kind::Count, |r| match r.key.kind {
            IcmpKind::Echo { ident } => Value::Int(u64::from(ident)),
            IcmpKind::Message { .. } => Value::Missing,
        });
        v.column("c_pkts_all", Kind::Count, |r| Value::Int(r.client.pkts));
        v.column("c_bytes_ip", Kind::Count, |r| Value::Int(r.client.ip_bytes));
        v.column("s_pkts_all", Kind::Count, |r| Value::Int(r.server.pkts));
        v.column("s_bytes_ip", Kind::Count, |r| Value::Int(r.server.ip_bytes));
        v.column("first", Kind::Time, |r| ms(r.first_ns));
        v.column("last", Kind::Time, |r| ms(r.last_ns));
        v.column("durat", Kind::Duration, |r| ms(r.last_ns.saturating_sub(r.first_ns)));
        v.column("rtt_cnt", Kind::Count, |r| echo_only(r, Value::Int(r.rtt.count)));
        v.column("rtt_min", Kind::Duration, |r| echo_rtt(r, 1, ms(r.rtt.min_ns)));
        v.column("rtt_avg", Kind::Duration, |r| echo_rtt(r, 1, ms_f(r.rtt.mean_ns())));
        v.column("rtt_max", Kind::Duration, |r| echo_rtt(r, 1, ms(r.rtt.max_ns)));
        v.column("rtt_std", Kind::Duration, |r| echo_rtt(r, 2, ms_f(r.rtt.stdev_ns())));
        v.column("replies_unmatched", Kind::Count, |r| echo_only(r, Value::Int(r.replies_unmatched)));
        v.column("c_isint", Kind::Flag, |r| Value::Bool(r.client_internal));
        v.column("s_isint", Kind::Flag, |r| Value::Bool(r.server_internal));
        v.column("end_reason", Kind::Label, |r| Value::Text(r.end.name()));
        v.column("tunnel", Kind::Label, |r| r.tunnel.map_or(Value::Missing, |t| Value::Text(t.name())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn column_names_are_unique() {
        let tcp: Vec<_> = tcp_columns().iter().map(|c| c.name).collect();
        assert_eq!(tcp.len(), tcp.iter().collect::<HashSet<_>>().len());
        let udp: Vec<_> = udp_columns().iter().map(|c| c.name).collect();
        assert_eq!(udp.len(), udp.iter().collect::<HashSet<_>>().len());
        let icmp: Vec<_> = icmp_columns().iter().map(|c| c.name).collect();
        assert_eq!(icmp.len(), icmp.iter().collect::<HashSet<_>>().len());
    }

    #[test]
    fn tstat_names_keep_their_order() {
        // The first 37 Tstat log_tcp_complete columns, as its header gives them.
        let tstat = "c_ip c_port c_pkts_all c_rst_cnt c_ack_cnt c_ack_cnt_p c_bytes_uniq c_pkts_data \
            c_bytes_all c_pkts_retx c_bytes_retx c_pkts_ooo c_syn_cnt c_fin_cnt s_ip s_port s_pkts_all \
            s_rst_cnt s_ack_cnt s_ack_cnt_p s_bytes_uniq s_pkts_data s_bytes_all s_pkts_retx s_bytes_retx \
            s_pkts_ooo s_syn_cnt s_fin_cnt first last durat c_first s_first c_last s_last c_first_ack s_first_ack";
        let ours: Vec<_> = tcp_columns().iter().map(|c| c.name).collect();
        let theirs: Vec<_> = tstat.split_whitespace().collect();
        assert_eq!(&ours[..theirs.len()], &theirs[..]);
    }
}
