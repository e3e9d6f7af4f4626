//! The columns of the flow logs: one table per protocol giving each field's name and how to
//! read it from a record. Names follow Tstat's log_tcp_complete/log_udp_complete where Tstat has
//! the same quantity (docs/metrics.md defines every one).

use std::net::IpAddr;

use sonde_flow::{IcmpErrors, IcmpKind, IcmpRecord, TcpDirStats, TcpRecord, UdpDirStats, UdpRecord};
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
    Bool(bool),
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
    ($record:ty) => {
        [
            Column::<$record> { name: "icmp_errors", kind: Kind::Count, value: |r| Value::Int(r.icmp_errors.count) },
            Column { name: "icmp_error_last", kind: Kind::Label, value: |r| icmp_error_last(r.icmp_errors) },
        ]
    };
}

macro_rules! tcp_dir_columns {
    ($p:literal, $side:ident) => {
        [
            Column::<TcpRecord> {
                name: concat!($p, "_pkts_all"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.pkts),
            },
            Column { name: concat!($p, "_rst_cnt"), kind: Kind::Count, value: |r| Value::Int(r.$side.rst_cnt) },
            Column { name: concat!($p, "_ack_cnt"), kind: Kind::Count, value: |r| Value::Int(r.$side.ack_pkts) },
            Column { name: concat!($p, "_ack_cnt_p"), kind: Kind::Count, value: |r| Value::Int(r.$side.pure_ack_pkts) },
            Column { name: concat!($p, "_bytes_uniq"), kind: Kind::Count, value: |r| Value::Int(r.$side.unique_bytes) },
            Column { name: concat!($p, "_pkts_data"), kind: Kind::Count, value: |r| Value::Int(r.$side.data_pkts) },
            Column { name: concat!($p, "_bytes_all"), kind: Kind::Count, value: |r| Value::Int(r.$side.payload_bytes) },
            Column { name: concat!($p, "_pkts_retx"), kind: Kind::Count, value: |r| Value::Int(r.$side.retx_pkts) },
            Column { name: concat!($p, "_bytes_retx"), kind: Kind::Count, value: |r| Value::Int(r.$side.retx_bytes) },
            Column { name: concat!($p, "_pkts_ooo"), kind: Kind::Count, value: |r| Value::Int(r.$side.ooo_pkts) },
            Column { name: concat!($p, "_syn_cnt"), kind: Kind::Count, value: |r| Value::Int(r.$side.syn_cnt) },
            Column { name: concat!($p, "_fin_cnt"), kind: Kind::Count, value: |r| Value::Int(r.$side.fin_cnt) },
        ]
    };
}

macro_rules! tcp_dir_rtt_columns {
    ($p:literal, $side:ident) => {
        [
            Column::<TcpRecord> {
                name: concat!($p, "_rtt_avg"),
                kind: Kind::Duration,
                value: |r| rtt(r.$side.rtt.count, 1, ms_f(r.$side.rtt.mean_ns())),
            },
            Column {
                name: concat!($p, "_rtt_min"),
                kind: Kind::Duration,
                value: |r| rtt(r.$side.rtt.count, 1, ms(r.$side.rtt.min_ns)),
            },
            Column {
                name: concat!($p, "_rtt_max"),
                kind: Kind::Duration,
                value: |r| rtt(r.$side.rtt.count, 1, ms(r.$side.rtt.max_ns)),
            },
            Column {
                name: concat!($p, "_rtt_std"),
                kind: Kind::Duration,
                value: |r| rtt(r.$side.rtt.count, 2, ms_f(r.$side.rtt.stdev_ns())),
            },
            Column { name: concat!($p, "_rtt_cnt"), kind: Kind::Count, value: |r| Value::Int(r.$side.rtt.count) },
            Column {
                name: concat!($p, "_ttl_min"),
                kind: Kind::Count,
                value: |r| seen(r.$side.pkts, u64::from(r.$side.ttl_min)),
            },
            Column {
                name: concat!($p, "_ttl_max"),
                kind: Kind::Count,
                value: |r| seen(r.$side.pkts, u64::from(r.$side.ttl_max)),
            },
        ]
    };
}

macro_rules! tcp_dir_option_columns {
    ($p:literal, $side:ident) => {
        [
            Column::<TcpRecord> {
                name: concat!($p, "_f1323_opt"),
                kind: Kind::Flag,
                value: |r| Value::Bool(r.$side.win_scale.is_some()),
            },
            Column { name: concat!($p, "_tm_opt"), kind: Kind::Flag, value: |r| Value::Bool(r.$side.timestamps) },
            Column {
                name: concat!($p, "_win_scl"),
                kind: Kind::Count,
                value: |r| r.$side.win_scale.map_or(Value::NoSample, |s| Value::Int(u64::from(s))),
            },
            Column { name: concat!($p, "_sack_opt"), kind: Kind::Flag, value: |r| Value::Bool(r.$side.sack_permitted) },
            Column { name: concat!($p, "_sack_cnt"), kind: Kind::Count, value: |r| Value::Int(r.$side.sack_blocks) },
            Column {
                name: concat!($p, "_mss"),
                kind: Kind::Count,
                value: |r| if r.$side.mss_opt == 0 { Value::NoSample } else { Value::Int(u64::from(r.$side.mss_opt)) },
            },
            Column {
                name: concat!($p, "_mss_max"),
                kind: Kind::Count,
                value: |r| seen(r.$side.data_pkts, u64::from(r.$side.seg_max)),
            },
            Column {
                name: concat!($p, "_mss_min"),
                kind: Kind::Count,
                value: |r| seen(r.$side.data_pkts, u64::from(r.$side.seg_min)),
            },
            Column { name: concat!($p, "_win_max"), kind: Kind::Count, value: |r| seen(r.$side.pkts, r.$side.win_max) },
            Column { name: concat!($p, "_win_min"), kind: Kind::Count, value: |r| seen(r.$side.pkts, r.$side.win_min) },
            Column { name: concat!($p, "_win_0"), kind: Kind::Count, value: |r| Value::Int(r.$side.win_zero) },
            Column { name: concat!($p, "_cwin_max"), kind: Kind::Count, value: |r| Value::Int(r.$side.inflight_max) },
            Column { name: concat!($p, "_cwin_min"), kind: Kind::Count, value: |r| Value::Int(r.$side.inflight_min) },
            Column {
                name: concat!($p, "_cwin_ini"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.inflight_initial),
            },
            Column { name: concat!($p, "_pkts_rto"), kind: Kind::Count, value: |r| Value::Int(r.$side.anomalies.rto) },
            Column {
                name: concat!($p, "_pkts_fs"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.anomalies.fast_retx),
            },
            Column {
                name: concat!($p, "_pkts_reor"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.anomalies.reordering),
            },
            Column {
                name: concat!($p, "_pkts_dup"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.anomalies.net_dup),
            },
            Column {
                name: concat!($p, "_pkts_unk"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.anomalies.unknown),
            },
            Column {
                name: concat!($p, "_pkts_fc"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.anomalies.flow_control),
            },
            Column {
                name: concat!($p, "_pkts_unrto"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.anomalies.unneeded_rto),
            },
            Column {
                name: concat!($p, "_pkts_unfs"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.anomalies.unneeded_fast_retx),
            },
            Column {
                name: concat!($p, "_syn_retx"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.syn_retx_new_isn),
            },
        ]
    };
}

macro_rules! tcp_dir_extra_columns {
    ($p:literal, $side:ident) => {
        [
            Column::<TcpRecord> {
                name: concat!($p, "_bytes_ip"),
                kind: Kind::Count,
                value: |r| Value::Int(r.$side.ip_bytes),
            },
            Column {
                name: concat!($p, "_first_pkt"),
                kind: Kind::Duration,
                value: |r| rel(r.$side.first_ns, r.first_ns),
            },
            Column {
                name: concat!($p, "_last_pkt"),
                kind: Kind::Duration,
                value: |r| rel(r.$side.last_ns, r.first_ns),
            },
        ]
    };
}

fn dir_first(d: &TcpDirStats, first_ns: u64) -> Value<'static> {
    rel(d.first_payload_ns, first_ns)
}

/// The TCP flow log's columns, in output order.
pub fn tcp_columns() -> Vec<Column<TcpRecord>> {
    let mut cols: Vec<Column<TcpRecord>> = vec![
        Column { name: "c_ip", kind: Kind::Address, value: |r| Value::Ip(r.endpoints.client_ip) },
        Column { name: "c_port", kind: Kind::Count, value: |r| Value::Int(u64::from(r.endpoints.client_port)) },
    ];
    cols.extend(tcp_dir_columns!("c", client));
    cols.push(Column { name: "s_ip", kind: Kind::Address, value: |r| Value::Ip(r.endpoints.server_ip) });
    cols.push(Column { name: "s_port", kind: Kind::Count, value: |r| Value::Int(u64::from(r.endpoints.server_port)) });
    cols.extend(tcp_dir_columns!("s", server));
    cols.extend([
        Column::<TcpRecord> { name: "first", kind: Kind::Time, value: |r| ms(r.first_ns) },
        Column { name: "last", kind: Kind::Time, value: |r| ms(r.last_ns) },
        Column { name: "durat", kind: Kind::Duration, value: |r| ms(r.last_ns.saturating_sub(r.first_ns)) },
        Column { name: "c_first", kind: Kind::Duration, value: |r| dir_first(&r.client, r.first_ns) },
        Column { name: "s_first", kind: Kind::Duration, value: |r| dir_first(&r.server, r.first_ns) },
        Column { name: "c_last", kind: Kind::Duration, value: |r| rel(r.client.last_payload_ns, r.first_ns) },
        Column { name: "s_last", kind: Kind::Duration, value: |r| rel(r.server.last_payload_ns, r.first_ns) },
        Column { name: "c_first_ack", kind: Kind::Duration, value: |r| rel(r.client.first_ack_ns, r.first_ns) },
        Column { name: "s_first_ack", kind: Kind::Duration, value: |r| rel(r.server.first_ack_ns, r.first_ns) },
        Column { name: "c_isint", kind: Kind::Flag, value: |r| Value::Bool(r.endpoints.client_internal) },
        Column { name: "s_isint", kind: Kind::Flag, value: |r| Value::Bool(r.endpoints.server_internal) },
        Column { name: "c_iscrypto", kind: Kind::Flag, value: |_| Value::Bool(false) },
        Column { name: "s_iscrypto", kind: Kind::Flag, value: |_| Value::Bool(false) },
    ]);
    cols.extend(tcp_dir_rtt_columns!("c", client));
    cols.extend(tcp_dir_rtt_columns!("s", server));
    cols.extend(tcp_dir_option_columns!("c", client));
    cols.extend(tcp_dir_option_columns!("s", server));
    // sonde's own columns, after Tstat's.
    cols.extend(tcp_dir_extra_columns!("c", client));
    cols.extend(tcp_dir_extra_columns!("s", server));
    cols.extend([
        Column::<TcpRecord> { name: "c_hs_rtt", kind: Kind::Duration, value: |r| opt_ms(r.hs_syn_synack_ns) },
        Column { name: "s_hs_rtt", kind: Kind::Duration, value: |r| opt_ms(r.hs_synack_ack_ns) },
        Column { name: "complete", kind: Kind::Flag, value: |r| Value::Bool(r.complete) },
        Column { name: "end_reason", kind: Kind::Label, value: |r| Value::Text(r.end.name()) },
        Column {
            name: "tunnel",
            kind: Kind::Label,
            value: |r| r.endpoints.tunnel.map_or(Value::Missing, |t| Value::Text(t.name())),
        },
    ]);
    cols.extend(tcp_app_columns());
    cols.extend(icmp_error_columns!(TcpRecord));
    cols
}

macro_rules! udp_dir_columns {
    ($p:literal, $side:ident, $ip:ident, $port:ident, $int:ident) => {
        [
            Column::<UdpRecord> {
                name: concat!($p, "_ip"),
                kind: Kind::Address,
                value: |r| Value::Ip(r.endpoints.$ip),
            },
            Column {
                name: concat!($p, "_port"),
                kind: Kind::Count,
                value: |r| Value::Int(u64::from(r.endpoints.$port)),
            },
            Column { name: concat!($p, "_first_abs"), kind: Kind::Time, value: |r| udp_first_abs(&r.$side) },
            Column { name: concat!($p, "_durat"), kind: Kind::Duration, value: |r| udp_durat(&r.$side) },
            Column { name: concat!($p, "_bytes_all"), kind: Kind::Count, value: |r| Value::Int(r.$side.payload_bytes) },
            Column { name: concat!($p, "_pkts_all"), kind: Kind::Count, value: |r| Value::Int(r.$side.pkts) },
            Column { name: concat!($p, "_isint"), kind: Kind::Flag, value: |r| Value::Bool(r.endpoints.$int) },
            Column { name: concat!($p, "_iscrypto"), kind: Kind::Flag, value: |_| Value::Bool(false) },
        ]
    };
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
fn community_id(protocol: u8, e: &sonde_flow::Endpoints) -> Value<'static> {
    type Flow = (u8, (IpAddr, u16), (IpAddr, u16));
    thread_local! {
        static LAST: std::cell::Cell<Option<(Flow, sonde_l7::CommunityId)>> = const { std::cell::Cell::new(None) };
    }
    let flow = (protocol, (e.client_ip, e.client_port), (e.server_ip, e.server_port));
    let id = LAST.with(|last| match last.get() {
        Some((seen, id)) if seen == flow => id,
        _ => {
            let id = sonde_l7::community_id(protocol, flow.1, flow.2, 0);
            last.set(Some((flow, id)));
            id
        }
    });
    Value::Id(id)
}

/// Columns both flow logs end with: the application, its Community ID, DN-Hunter's name and
/// the DNS facts (docs/l7.md).
macro_rules! app_columns {
    ($rec:ty, $transport:expr, $protocol:literal) => {
        [
            Column::<$rec> {
                name: "app",
                kind: Kind::Label,
                value: |r| Value::Text(app_label(r.app.as_deref(), $transport, &r.endpoints).name),
            },
            Column {
                name: "app_by_port",
                kind: Kind::Flag,
                value: |r| Value::Bool(app_label(r.app.as_deref(), $transport, &r.endpoints).by_port),
            },
            Column { name: "community_id", kind: Kind::Label, value: |r| community_id($protocol, &r.endpoints) },
            Column {
                name: "fqdn",
                kind: Kind::Label,
                value: |r| text(r.app.as_ref().and_then(|a| a.resolved.as_ref()).map(|d| &*d.name)),
            },
            Column {
                name: "dns_rslv",
                kind: Kind::Address,
                value: |r| {
                    r.app.as_ref().and_then(|a| a.resolved.as_ref()).map_or(Value::Missing, |d| Value::Ip(d.resolver))
                },
            },
            Column {
                name: "dns_qry",
                kind: Kind::Label,
                value: |r| text(r.app.as_ref().and_then(|a| a.dns.as_ref()).and_then(|d| d.query.as_deref())),
            },
            Column {
                name: "dns_qtype",
                kind: Kind::Count,
                value: |r| {
                    r.app
                        .as_ref()
                        .and_then(|a| a.dns.as_ref()?.qtype)
                        .map_or(Value::Missing, |t| Value::Int(u64::from(t)))
                },
            },
            Column {
                name: "dns_rcode",
                kind: Kind::Count,
                value: |r| {
                    r.app
                        .as_ref()
                        .and_then(|a| a.dns.as_ref()?.rcode)
                        .map_or(Value::Missing, |c| Value::Int(u64::from(c)))
                },
            },
            Column {
                name: "dns_answers",
                kind: Kind::Label,
                value: |r| match r.app.as_ref().and_then(|a| a.dns.as_ref()) {
                    Some(d) if !d.answers.is_empty() => {
                        Value::Owned(d.answers.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(","))
                    }
                    _ => Value::Missing,
                },
            },
        ]
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
    ($p:literal, $dir:literal) => {
        [
            Column::<TcpRecord> {
                name: concat!($p, "_last_handshakeT"),
                kind: Kind::Duration,
                value: |r| app_rel(tls_of(r).and_then(|t| t.last_handshake_ns[$dir]), r.first_ns),
            },
            Column {
                name: concat!($p, "_appdataT"),
                kind: Kind::Duration,
                value: |r| app_rel(tls_of(r).and_then(|t| t.first_appdata_ns[$dir]), r.first_ns),
            },
            Column {
                name: concat!($p, "_appdataB"),
                kind: Kind::Count,
                value: |r| tls_of(r).map_or(Value::Missing, |t| Value::Int(t.appdata_bytes[$dir])),
            },
        ]
    };
}

/// The TCP flow log's layer-7 columns (Tstat's names where Tstat has the quantity).
fn tcp_app_columns() -> Vec<Column<TcpRecord>> {
    let mut cols: Vec<Column<TcpRecord>> = app_columns!(TcpRecord, sonde_l7::Transport::Tcp, 6).into();
    cols.extend([
        Column::<TcpRecord> {
            name: "c_tls_SNI",
            kind: Kind::Label,
            value: |r| text(tls_of(r).and_then(|t| t.sni.as_deref())),
        },
        Column {
            name: "s_tls_SCN",
            kind: Kind::Label,
            value: |r| text(tls_of(r).and_then(|t| t.cert_subject.as_deref())),
        },
        Column {
            name: "c_npnalpn",
            kind: Kind::Label,
            value: |r| tls_of(r).map_or(Value::Missing, |t| joined(&t.alpn_offered)),
        },
        Column { name: "s_npnalpn", kind: Kind::Label, value: |r| text(tls_of(r).and_then(|t| t.alpn.as_deref())) },
        Column { name: "c_TLSvers", kind: Kind::Label, value: |r| tls_version(tls_of(r).and_then(offered_version)) },
        Column { name: "s_TLSvers", kind: Kind::Label, value: |r| tls_version(tls_of(r).and_then(|t| t.version)) },
        Column { name: "tls_ja3", kind: Kind::Label, value: |r| text(tls_of(r).and_then(|t| t.ja3.as_deref())) },
        Column { name: "tls_ja3s", kind: Kind::Label, value: |r| text(tls_of(r).and_then(|t| t.ja3s.as_deref())) },
        Column { name: "tls_ja4", kind: Kind::Label, value: |r| text(tls_of(r).and_then(|t| t.ja4.as_deref())) },
    ]);
    cols.extend(tls_dir_columns!("c", 0));
    cols.extend(tls_dir_columns!("s", 1));
    cols.extend([
        Column::<TcpRecord> {
            name: "http_req_cnt",
            kind: Kind::Count,
            value: |r| http_of(r).map_or(Value::Missing, |h| Value::Int(u64::from(h.requests))),
        },
        Column {
            name: "http_res_cnt",
            kind: Kind::Count,
            value: |r| http_of(r).map_or(Value::Missing, |h| Value::Int(u64::from(h.responses))),
        },
        Column {
            name: "http_res",
            kind: Kind::Count,
            value: |r| http_of(r).and_then(|h| h.status).map_or(Value::Missing, |s| Value::Int(u64::from(s))),
        },
        Column {
            name: "http_method",
            kind: Kind::Label,
            value: |r| text(http_of(r).and_then(|h| h.method.as_deref())),
        },
        Column {
            name: "http_hostname",
            kind: Kind::Label,
            value: |r| text(http_of(r).and_then(|h| h.host.as_deref())),
        },
        Column {
            name: "http_ua",
            kind: Kind::Label,
            value: |r| text(http_of(r).and_then(|h| h.user_agent.as_deref())),
        },
    ]);
    cols
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
    ($p:literal, $dir:literal) => {
        [
            Column::<UdpRecord> {
                name: concat!($p, "_rtp_ssrc"),
                kind: Kind::Count,
                value: |r| rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(u64::from(s.ssrc))),
            },
            Column {
                name: concat!($p, "_rtp_pt"),
                kind: Kind::Count,
                value: |r| rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(u64::from(s.payload_type))),
            },
            Column {
                name: concat!($p, "_rtp_pkts"),
                kind: Kind::Count,
                value: |r| rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.packets)),
            },
            Column {
                name: concat!($p, "_rtp_lost"),
                kind: Kind::Count,
                value: |r| rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.lost.max(0) as u64)),
            },
            Column {
                name: concat!($p, "_rtp_oos"),
                kind: Kind::Count,
                value: |r| rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.out_of_sequence)),
            },
            Column {
                name: concat!($p, "_rtp_dup"),
                kind: Kind::Count,
                value: |r| rtp_of(r, $dir).map_or(Value::Missing, |s| Value::Int(s.duplicates)),
            },
            Column {
                name: concat!($p, "_rtp_jitter_avg"),
                kind: Kind::Duration,
                value: |r| rtp_jitter(rtp_of(r, $dir), |s| s.jitter_mean),
            },
            Column {
                name: concat!($p, "_rtp_jitter_max"),
                kind: Kind::Duration,
                value: |r| rtp_jitter(rtp_of(r, $dir), |s| s.jitter_max),
            },
            Column {
                name: concat!($p, "_rtcp_pkts"),
                kind: Kind::Count,
                value: |r| {
                    r.app
                        .as_ref()
                        .and_then(|a| a.rtp.as_ref())
                        .map_or(Value::Missing, |rtp| Value::Int(rtp.rtcp[$dir].packets))
                },
            },
        ]
    };
}

/// The UDP flow log's layer-7 columns (Tstat's names where Tstat has the quantity).
fn udp_app_columns() -> Vec<Column<UdpRecord>> {
    let mut cols: Vec<Column<UdpRecord>> = app_columns!(UdpRecord, sonde_l7::Transport::Udp, 17).into();
    cols.extend([
        Column::<UdpRecord> {
            name: "quic_SNI",
            kind: Kind::Label,
            value: |r| text(quic_of(r).and_then(|q| q.tls.sni.as_deref())),
        },
        Column {
            name: "quic_UA",
            kind: Kind::Label,
            value: |r| text(quic_of(r).and_then(|q| q.user_agent.as_deref())),
        },
        Column {
            name: "quic_c_vers",
            kind: Kind::Label,
            value: |r| quic_version(quic_of(r).and_then(|q| q.client_version)),
        },
        Column {
            name: "quic_s_vers",
            kind: Kind::Label,
            value: |r| quic_version(quic_of(r).and_then(|q| q.server_version)),
        },
        Column {
            name: "quic_zero_rtt",
            kind: Kind::Flag,
            value: |r| quic_of(r).map_or(Value::Missing, |q| Value::Bool(q.zero_rtt)),
        },
        Column {
            name: "quic_ech",
            kind: Kind::Flag,
            value: |r| quic_of(r).map_or(Value::Missing, |q| Value::Bool(q.ech)),
        },
        Column {
            name: "quic_alpn",
            kind: Kind::Label,
            value: |r| quic_of(r).map_or(Value::Missing, |q| joined(&q.tls.alpn_offered)),
        },
        Column { name: "quic_ja4", kind: Kind::Label, value: |r| text(quic_of(r).and_then(|q| q.tls.ja4.as_deref())) },
    ]);
    cols.extend(rtp_dir_columns!("c", 0));
    cols.extend(rtp_dir_columns!("s", 1));
    cols
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
    let mut cols: Vec<Column<UdpRecord>> = Vec::new();
    cols.extend(udp_dir_columns!("c", client, client_ip, client_port, client_internal));
    cols.extend(udp_dir_columns!("s", server, server_ip, server_port, server_internal));
    cols.extend([
        Column::<UdpRecord> { name: "c_bytes_ip", kind: Kind::Count, value: |r| Value::Int(r.client.ip_bytes) },
        Column { name: "s_bytes_ip", kind: Kind::Count, value: |r| Value::Int(r.server.ip_bytes) },
        Column { name: "first", kind: Kind::Time, value: |r| ms(r.first_ns) },
        Column { name: "last", kind: Kind::Time, value: |r| ms(r.last_ns) },
        Column { name: "durat", kind: Kind::Duration, value: |r| ms(r.last_ns.saturating_sub(r.first_ns)) },
        Column { name: "end_reason", kind: Kind::Label, value: |r| Value::Text(r.end.name()) },
        Column {
            name: "tunnel",
            kind: Kind::Label,
            value: |r| r.endpoints.tunnel.map_or(Value::Missing, |t| Value::Text(t.name())),
        },
    ]);
    cols.extend(udp_app_columns());
    cols.extend(icmp_error_columns!(UdpRecord));
    cols
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
    vec![
        Column::<IcmpRecord> { name: "c_ip", kind: Kind::Address, value: |r| Value::Ip(r.key.client) },
        Column { name: "s_ip", kind: Kind::Address, value: |r| Value::Ip(r.key.server) },
        Column { name: "proto", kind: Kind::Label, value: |r| Value::Text(r.key.proto()) },
        Column {
            name: "kind",
            kind: Kind::Label,
            value: |r| {
                Value::Text(match r.key.kind {
                    IcmpKind::Echo { .. } => "echo",
                    IcmpKind::Message { .. } => "message",
                })
            },
        },
        Column {
            name: "icmp_type",
            kind: Kind::Count,
            value: |r| match r.key.kind {
                IcmpKind::Message { icmp_type, .. } => Value::Int(u64::from(icmp_type)),
                IcmpKind::Echo { .. } => Value::Missing,
            },
        },
        Column {
            name: "icmp_code",
            kind: Kind::Count,
            value: |r| match r.key.kind {
                IcmpKind::Message { code, .. } => Value::Int(u64::from(code)),
                IcmpKind::Echo { .. } => Value::Missing,
            },
        },
        Column {
            name: "echo_id",
            kind: Kind::Count,
            value: |r| match r.key.kind {
                IcmpKind::Echo { ident } => Value::Int(u64::from(ident)),
                IcmpKind::Message { .. } => Value::Missing,
            },
        },
        Column { name: "c_pkts_all", kind: Kind::Count, value: |r| Value::Int(r.client.pkts) },
        Column { name: "c_bytes_ip", kind: Kind::Count, value: |r| Value::Int(r.client.ip_bytes) },
        Column { name: "s_pkts_all", kind: Kind::Count, value: |r| Value::Int(r.server.pkts) },
        Column { name: "s_bytes_ip", kind: Kind::Count, value: |r| Value::Int(r.server.ip_bytes) },
        Column { name: "first", kind: Kind::Time, value: |r| ms(r.first_ns) },
        Column { name: "last", kind: Kind::Time, value: |r| ms(r.last_ns) },
        Column { name: "durat", kind: Kind::Duration, value: |r| ms(r.last_ns.saturating_sub(r.first_ns)) },
        Column { name: "rtt_cnt", kind: Kind::Count, value: |r| echo_only(r, Value::Int(r.rtt.count)) },
        Column { name: "rtt_min", kind: Kind::Duration, value: |r| echo_rtt(r, 1, ms(r.rtt.min_ns)) },
        Column { name: "rtt_avg", kind: Kind::Duration, value: |r| echo_rtt(r, 1, ms_f(r.rtt.mean_ns())) },
        Column { name: "rtt_max", kind: Kind::Duration, value: |r| echo_rtt(r, 1, ms(r.rtt.max_ns)) },
        Column { name: "rtt_std", kind: Kind::Duration, value: |r| echo_rtt(r, 2, ms_f(r.rtt.stdev_ns())) },
        Column {
            name: "replies_unmatched",
            kind: Kind::Count,
            value: |r| echo_only(r, Value::Int(r.replies_unmatched)),
        },
        Column { name: "c_isint", kind: Kind::Flag, value: |r| Value::Bool(r.client_internal) },
        Column { name: "s_isint", kind: Kind::Flag, value: |r| Value::Bool(r.server_internal) },
        Column { name: "end_reason", kind: Kind::Label, value: |r| Value::Text(r.end.name()) },
        Column {
            name: "tunnel",
            kind: Kind::Label,
            value: |r| r.tunnel.map_or(Value::Missing, |t| Value::Text(t.name())),
        },
    ]
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
