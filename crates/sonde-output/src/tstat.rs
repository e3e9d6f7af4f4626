//! Tstat 3.3's flow logs (`--layout tstat`): `log_tcp_complete` (134 columns),
//! `log_tcp_nocomplete` (its first 44) and `log_udp_complete` (25), laid out as Tstat prints
//! them — its header line (`#15#c_ip:1 …`, `#c_ip:1 …` for UDP), space-separated values, its
//! units and number formats — so that a script written for Tstat's logs reads sonde's unchanged.
//!
//! Every column is a name and a function of the record, as in [`crate::columns`]; the values
//! are Tstat's: times in ms as C's `%f` of a double (absolute times are ms since the epoch,
//! computed from microseconds as Tstat does, so they carry the same binary noise, e.g.
//! `1795300702508.506104`), UDP durations in seconds, RTT statistics with Tstat's own formulas
//! (its mean divides by `n + 0.0001`; its deviation is 0 up to two samples). What sonde does not
//! measure prints what Tstat prints when it has nothing (docs/tstat-layout.md lists them).
//! Names read from the traffic are escaped so that a value stays one field: see [`escape`].

use std::io::Write as _;
use std::net::IpAddr;

use sonde_flow::tstat::TstatDir;
use sonde_flow::{EndReason, TcpDirStats, TcpRecord, UdpDirStats, UdpRecord};
use sonde_l7::{Facts, TstatL7, CON_HTTP, CON_IMAP, CON_MSE, CON_OBF, CON_POP3, CON_SMTP, CON_SSH, CON_TLS};

/// Which layout the flow logs take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// sonde's own: `tcp_flows.tsv`, `udp_flows.tsv` (docs/metrics.md).
    #[default]
    Sonde,
    /// Tstat 3.3's: `log_tcp_complete`, `log_tcp_nocomplete`, `log_udp_complete`.
    Tstat,
}

/// The Tstat log a flow goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TstatLog {
    TcpComplete,
    TcpNocomplete,
    UdpComplete,
}

/// Tstat's `con_t` bits (its protocol.h) that sonde can tell.
pub mod con_t {
    pub const HTTP: u64 = 1;
    pub const TLS: u64 = 8192;
}

/// Tstat's UDP flow types (`enum udp_type` in its struct.h) that sonde can tell, for `c_type`
/// and `s_type`.
pub mod udp_type {
    pub const UNKNOWN: u64 = 0;
    /// One RTP or RTCP packet seen (RFC 7983 demultiplexing).
    pub const FIRST_RTP_PLUS: u64 = 28;
    /// RTP confirmed: a second packet of the same SSRC in sequence.
    pub const RTP_PLUS: u64 = 29;
    pub const DNS: u64 = 19;
    pub const QUIC: u64 = 27;
}

/// The log of a TCP flow, as Tstat decides it; `None`: Tstat never tracks it (its table only
/// opens a flow on a client SYN without ACK, so a flow whose opening sonde did not see is not
/// in Tstat's logs). A flow closed by FINs from both sides is complete; one reset, idle or
/// evicted is complete when both SYNs were seen; one still open at the end of the input is
/// not (Tstat's `trace_done` logs those with `complete` false).
pub fn tcp_log(r: &TcpRecord) -> Option<TstatLog> {
    if let Some(t) = r.tstat.as_deref() {
        // Tstat's own decision, followed packet by packet (`FlowConfig::tstat`).
        if !t.opened {
            return None;
        }
        let complete = t.complete(matches!(r.end, EndReason::Eof | EndReason::Open));
        return Some(if complete { TstatLog::TcpComplete } else { TstatLog::TcpNocomplete });
    }
    if r.client.syn_cnt == 0 {
        return None;
    }
    let both_syns = r.client.syn_cnt > 0 && r.server.syn_cnt > 0;
    let complete = match r.end {
        EndReason::Fin => true,
        EndReason::Rst | EndReason::Idle | EndReason::Evicted | EndReason::Reused | EndReason::Expired => both_syns,
        EndReason::Eof | EndReason::Open => false,
    };
    Some(if complete { TstatLog::TcpComplete } else { TstatLog::TcpNocomplete })
}

/// One value as Tstat prints it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field<'a> {
    /// `%d`, `%u`, `%lu`.
    Int(u64),
    /// `%d` of a signed value.
    Signed(i64),
    /// `%f`: six decimals.
    Float(f64),
    /// An absolute time (ns since the epoch) as Tstat prints it: `time2double(t) / 1000.0` with
    /// `%f`, i.e. ms since the epoch computed in a double from whole microseconds.
    Abs(u64),
    Ip(IpAddr),
    /// A fixed text.
    Text(&'static str),
    /// A name from the traffic, escaped ([`escape`]); `-` when absent.
    Name(Option<&'a str>),
    /// 1 when the run anonymises addresses (`c_iscrypto`, `s_iscrypto`), else 0.
    Crypto,
    /// 1 when the run anonymises addresses and the flag holds (`dns_enc`), else 0.
    CryptoIf(bool),
    /// A 16-bit value as `%04x`; `-` when absent.
    Hex16(Option<u16>),
    /// A text of sonde's own making (a version list, a status), as it is.
    Raw(&'a str),
    /// A 32-bit value as `0x%08x`.
    Hex32(u32),
}

/// A Tstat column: its name and how to read it from a record.
pub struct TstatColumn<R> {
    pub name: &'static str,
    pub value: fn(&R) -> Field<'_>,
}

/// Writes a record's line with a column table.
pub struct TstatFormat<R> {
    columns: Vec<TstatColumn<R>>,
    anonymized: bool,
}

impl<R> TstatFormat<R> {
    pub fn new(columns: Vec<TstatColumn<R>>, anonymized: bool) -> TstatFormat<R> {
        TstatFormat { columns, anonymized }
    }

    pub fn columns(&self) -> &[TstatColumn<R>] {
        &self.columns
    }

    /// The record's line (newline included) in `buf` (cleared first).
    pub fn format<'b>(&self, buf: &'b mut Vec<u8>, record: &R) -> &'b [u8] {
        buf.clear();
        for (i, column) in self.columns.iter().enumerate() {
            if i > 0 {
                buf.push(b' ');
            }
            put(buf, (column.value)(record), self.anonymized);
        }
        buf.push(b'\n');
        buf
    }
}

/// Tstat's header line for `columns` (newline included): `name:position` separated by spaces,
/// after `prefix` (`#15#` for the TCP logs: Tstat writes its log level there; `#` for UDP).
pub fn header<R>(prefix: &str, columns: &[TstatColumn<R>]) -> String {
    let mut out = String::from(prefix);
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(c.name);
        out.push(':');
        out.push_str(&(i + 1).to_string());
    }
    out.push('\n');
    out
}

/// The header prefix of a log.
pub fn header_prefix(log: TstatLog) -> &'static str {
    match log {
        // Tstat writes `#%02d` of its log level: 15 is every block but the advanced one.
        TstatLog::TcpComplete | TstatLog::TcpNocomplete => "#15#",
        TstatLog::UdpComplete => "#",
    }
}

fn put(buf: &mut Vec<u8>, field: Field<'_>, anonymized: bool) {
    // Writing to a Vec cannot fail.
    let _ = match field {
        Field::Int(n) => write!(buf, "{n}"),
        Field::Signed(n) => write!(buf, "{n}"),
        Field::Float(x) => write!(buf, "{x:.6}"),
        Field::Abs(ns) => write!(buf, "{:.6}", abs_ms(ns)),
        Field::Ip(ip) => write!(buf, "{ip}"),
        Field::Text(s) => write!(buf, "{s}"),
        Field::Name(Some(s)) if !s.is_empty() => {
            escape(buf, s);
            Ok(())
        }
        Field::Name(_) => write!(buf, "-"),
        Field::Crypto => write!(buf, "{}", u8::from(anonymized)),
        Field::CryptoIf(b) => write!(buf, "{}", u8::from(anonymized && b)),
        Field::Hex16(Some(v)) => write!(buf, "{v:04x}"),
        Field::Hex16(None) => write!(buf, "-"),
        Field::Raw(s) => write!(buf, "{s}"),
        Field::Hex32(v) => write!(buf, "0x{v:08x}"),
    };
}

/// Writes a name read from the traffic so that it stays one space-separated field: bytes that
/// would split or break a line (space and every ASCII control byte, DEL) and `%` itself are
/// written `%XX` (URL percent-encoding, upper-case hex), everything else as it is (UTF-8
/// included). Tstat writes names raw; a name with a space would shift every later column.
pub fn escape(buf: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        if b <= b' ' || b == 0x7f || b == b'%' {
            let _ = write!(buf, "%{b:02X}");
        } else {
            buf.push(b);
        }
    }
}

/// Whole microseconds of a time in ns (libpcap hands Tstat microseconds: nanosecond captures
/// are cut, not rounded).
fn us(ns: u64) -> u64 {
    ns / 1_000
}

/// `time2double(t) / 1000.0`: seconds × 10⁶ plus microseconds, in a double, over 1000.
fn abs_ms(ns: u64) -> f64 {
    let (sec, usec) = (ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000);
    (sec as f64 * 1_000_000.0 + usec as f64) / 1000.0
}

/// Tstat's `elapsed(t1, t2) / 1000.0`: ms from `t1` to `t2` in whole microseconds; 0 when `t2`
/// is earlier (as for an event that never happened, time 0).
fn elapsed_ms(t1_ns: u64, t2_ns: u64) -> f64 {
    let (a, b) = (us(t1_ns), us(t2_ns));
    if b < a {
        0.0
    } else {
        (b - a) as f64 / 1000.0
    }
}

fn rel(r: &TcpRecord, t_ns: u64) -> Field<'static> {
    Field::Float(elapsed_ms(r.first_ns, t_ns))
}

fn rel_opt(r: &TcpRecord, t_ns: Option<u64>) -> Field<'static> {
    Field::Float(t_ns.map_or(0.0, |t| elapsed_ms(r.first_ns, t)))
}

/// One direction's RTT samples as Tstat takes them: sonde's data→ACK samples plus the
/// handshake's (Tstat times the SYN and the SYN/ACK like data: `hs` is the client's SYN to the
/// SYN/ACK, or the SYN/ACK to the client's ACK, when sent once: `tstat_syn_sample`). Tstat also
/// times FINs; sonde does not (docs/tstat-comparison.md).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rtt {
    count: u64,
    sum_us: f64,
    sum2_us: f64,
    min_us: f64,
    max_us: f64,
}

impl Rtt {
    /// Direction `i`'s samples: Tstat's own when followed, else sonde's plus the handshake's
    /// (`hs`).
    fn of(rec: &TcpRecord, i: usize, d: &TcpDirStats, hs: fn(&TcpRecord) -> Option<u64>) -> Rtt {
        match tdir(rec, i) {
            Some(t) => Rtt {
                count: u64::from(t.rtt_count),
                sum_us: t.rtt_sum,
                sum2_us: t.rtt_sum2,
                min_us: t.rtt_min as f64,
                max_us: t.rtt_max as f64,
            },
            None => Rtt::of_sonde(d, hs(rec)),
        }
    }

    fn of_sonde(d: &TcpDirStats, hs_ns: Option<u64>) -> Rtt {
        let r = &d.rtt;
        let mut rtt = Rtt {
            count: r.count,
            sum_us: r.sum_ns / 1_000.0,
            sum2_us: r.sum_sq_ns2 / 1_000_000.0,
            min_us: if r.count == 0 { 0.0 } else { us(r.min_ns) as f64 },
            max_us: if r.count == 0 { 0.0 } else { us(r.max_ns) as f64 },
        };
        if let Some(hs) = hs_ns {
            let x = us(hs) as f64;
            rtt.min_us = if rtt.count == 0 { x } else { rtt.min_us.min(x) };
            rtt.max_us = rtt.max_us.max(x);
            rtt.count += 1;
            rtt.sum_us += x;
            rtt.sum2_us += x * x;
        }
        rtt
    }

    /// Tstat's `Average(sum, n) / 1000`: the mean in ms, over `n + 0.0001` as Tstat computes it.
    fn avg_ms(&self) -> f64 {
        self.sum_us / (self.count as f64 + 0.0001) / 1000.0
    }

    /// Tstat's `Stdev(sum, sum2, n) / 1000`: the sample deviation in ms, 0 up to two samples.
    fn std_ms(&self) -> f64 {
        let n = self.count;
        if n <= 2 {
            return 0.0;
        }
        let var = (self.sum2_us - self.sum_us * self.sum_us / n as f64) / (n - 1) as f64;
        var.max(0.0).sqrt() / 1000.0
    }
}

/// The handshake leg Tstat times for the client (its SYN to the SYN/ACK). Tstat applies Karn's
/// rule to the SYN as to data: a SYN sent again before its SYN/ACK gives no sample. sonde times
/// the leg from the last SYN before the answer, so it was timed from the first SYN exactly when
/// the client's first packet plus the leg is the server's first packet (the SYN/ACK).
fn tstat_syn_sample(r: &TcpRecord) -> Option<u64> {
    r.hs_syn_synack_ns
        .filter(|hs| r.client.syn_cnt <= 1 || r.client.first_ns.checked_add(*hs) == Some(r.server.first_ns))
}

/// The server's leg (SYN/ACK to the client's ACK), by the same rule: a SYN/ACK sent again
/// before the client's first ACK gives Tstat no sample.
fn tstat_synack_sample(r: &TcpRecord) -> Option<u64> {
    r.hs_synack_ack_ns
        .filter(|hs| r.server.syn_cnt <= 1 || r.server.first_ns.checked_add(*hs) == Some(r.client.first_ack_ns))
}

/// The flow's last packet time as Tstat's (which ends flows at other packets than sonde's).
fn last_ns(r: &TcpRecord) -> u64 {
    r.tstat.as_deref().map_or(r.last_ns, |t| t.last_ns)
}

/// Tstat stops reading a flow at its first RST, before it notes the packet's ACK: a first ACK
/// that came with the reset ending the flow is none for Tstat.
fn first_ack(r: &TcpRecord, d: &TcpDirStats) -> Field<'static> {
    if d.rst_cnt > 0 && d.first_ack_ns == r.last_ns && r.end == EndReason::Rst {
        Field::Float(0.0)
    } else {
        rel(r, d.first_ack_ns)
    }
}

fn facts(app: &Option<Box<Facts>>) -> Option<&Facts> {
    app.as_deref()
}

/// The flow as Tstat's classifier read it (sonde_l7::TstatL7: made for every TCP flow with
/// payload when the Tstat layout is written); None: no payload, nothing classified.
fn tstat_l7(r: &TcpRecord) -> Option<&TstatL7> {
    facts(&r.app).and_then(|f| f.tstat.as_deref())
}

/// Tstat's `con_t` as far as sonde recognises the protocols (docs/tstat-layout.md): HTTP (a
/// request method, then a server packet starting `HTTP`), TLS (a ClientHello, then a
/// ServerHello within the flow's first 10 packets), SMTP, POP3, IMAP and SSH (the server's
/// greeting, then the client's command), eMule's obfuscation (segment sizes) and BitTorrent's MSE (the first messages' sizes and
/// entropy), read as Tstat's classifier does.
pub fn tcp_con_t(r: &TcpRecord) -> u64 {
    tstat_l7(r).map_or(0, |t| {
        u64::from(t.con_t & (CON_HTTP | CON_TLS | CON_SMTP | CON_POP3 | CON_IMAP | CON_SSH | CON_MSE | CON_OBF))
    })
}

fn is_tls(r: &TcpRecord) -> bool {
    tcp_con_t(r) & con_t::TLS != 0
}

fn is_http(r: &TcpRecord) -> bool {
    tcp_con_t(r) & con_t::HTTP != 0
}

/// Tstat's `http_t`: its `http_data + 1` for an HTTP flow (1 an unclassified GET, or a flow
/// opened by another method, 2 an unclassified POST; sonde does not sort requests by web
/// site), 0 otherwise.
fn http_t(r: &TcpRecord) -> u64 {
    match tstat_l7(r) {
        Some(t) if is_http(r) => 1 + u64::from(t.http_post),
        _ => 0,
    }
}

fn http_res(r: &TcpRecord) -> Field<'_> {
    match tstat_l7(r) {
        Some(t) if is_http(r) => {
            let len = usize::from(t.http_status_len).min(3);
            Field::Raw(std::str::from_utf8(&t.http_status[..len]).unwrap_or("000"))
        }
        _ => Field::Text("---"),
    }
}

/// Direction `i`'s (0 client, 1 server) Tstat state, when the run followed Tstat's rules
/// (`FlowConfig::tstat`: every `--layout tstat` run). Records without it (built otherwise) are
/// read from sonde's own measures.
fn tdir(r: &TcpRecord, i: usize) -> Option<&TstatDir> {
    r.tstat.as_deref().map(|t| &t.dirs[i])
}

/// A column read from Tstat's state of direction `$i` (`$t`), else from sonde's measure of
/// `$side` (`$s`).
macro_rules! pick {
    ($r:ident, $i:literal, |$d:ident| $t:expr, $s:expr) => {
        match tdir($r, $i) {
            Some($d) => $t,
            None => $s,
        }
    };
}

macro_rules! tcp_core_dir {
    ($p:literal, $side:ident, $i:literal) => {
        [
            TstatColumn::<TcpRecord> {
                name: concat!($p, "_pkts_all"),
                value: |r| Field::Int(pick!(r, $i, |d| d.packets, r.$side.pkts)),
            },
            TstatColumn {
                name: concat!($p, "_rst_cnt"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.reset_count), r.$side.rst_cnt)),
            },
            TstatColumn {
                name: concat!($p, "_ack_cnt"),
                value: |r| Field::Int(pick!(r, $i, |d| d.ack_pkts, r.$side.ack_pkts)),
            },
            TstatColumn {
                name: concat!($p, "_ack_cnt_p"),
                value: |r| Field::Int(pick!(r, $i, |d| d.pureack_pkts, r.$side.pure_ack_pkts)),
            },
            TstatColumn {
                name: concat!($p, "_bytes_uniq"),
                value: |r| Field::Int(pick!(r, $i, |d| d.unique_bytes, r.$side.unique_bytes)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_data"),
                value: |r| Field::Int(pick!(r, $i, |d| d.data_pkts, r.$side.data_pkts)),
            },
            TstatColumn {
                name: concat!($p, "_bytes_all"),
                value: |r| Field::Int(pick!(r, $i, |d| d.data_bytes, r.$side.payload_bytes)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_retx"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.rexmit_pkts), r.$side.retx_pkts)),
            },
            TstatColumn {
                name: concat!($p, "_bytes_retx"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.rexmit_bytes), r.$side.retx_bytes)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_ooo"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.out_order_pkts), r.$side.ooo_pkts)),
            },
            TstatColumn {
                name: concat!($p, "_syn_cnt"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.syn_count), r.$side.syn_cnt)),
            },
            TstatColumn {
                name: concat!($p, "_fin_cnt"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.fin_count), r.$side.fin_cnt)),
            },
        ]
    };
}

macro_rules! tcp_e2e_dir {
    ($p:literal, $side:ident, $i:literal, $hs:ident) => {
        [
            TstatColumn::<TcpRecord> {
                name: concat!($p, "_rtt_avg"),
                value: |r| Field::Float(Rtt::of(r, $i, &r.$side, $hs).avg_ms()),
            },
            TstatColumn {
                name: concat!($p, "_rtt_min"),
                value: |r| Field::Float(Rtt::of(r, $i, &r.$side, $hs).min_us / 1000.0),
            },
            TstatColumn {
                name: concat!($p, "_rtt_max"),
                value: |r| Field::Float(Rtt::of(r, $i, &r.$side, $hs).max_us / 1000.0),
            },
            TstatColumn {
                name: concat!($p, "_rtt_std"),
                value: |r| Field::Float(Rtt::of(r, $i, &r.$side, $hs).std_ms()),
            },
            TstatColumn { name: concat!($p, "_rtt_cnt"), value: |r| Field::Int(Rtt::of(r, $i, &r.$side, $hs).count) },
            TstatColumn {
                name: concat!($p, "_ttl_min"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.ttl_min), u64::from(r.$side.ttl_min))),
            },
            TstatColumn {
                name: concat!($p, "_ttl_max"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.ttl_max), u64::from(r.$side.ttl_max))),
            },
        ]
    };
}

macro_rules! tcp_options_dir {
    ($p:literal, $side:ident, $i:literal) => {
        [
            TstatColumn::<TcpRecord> {
                name: concat!($p, "_f1323_opt"),
                value: |r| Field::Int(u64::from(pick!(r, $i, |d| d.f1323_ws, r.$side.win_scale.is_some()))),
            },
            TstatColumn {
                name: concat!($p, "_tm_opt"),
                value: |r| Field::Int(u64::from(pick!(r, $i, |d| d.f1323_ts, r.$side.timestamps))),
            },
            TstatColumn {
                name: concat!($p, "_win_scl"),
                value: |r| {
                    Field::Int(pick!(r, $i, |d| u64::from(d.window_scale), r.$side.win_scale.map_or(0, u64::from)))
                },
            },
            TstatColumn {
                name: concat!($p, "_sack_opt"),
                value: |r| Field::Int(u64::from(pick!(r, $i, |d| d.fsack_req, r.$side.sack_permitted))),
            },
            TstatColumn {
                name: concat!($p, "_sack_cnt"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.sacks_sent), r.$side.sack_blocks)),
            },
            TstatColumn {
                name: concat!($p, "_mss"),
                value: |r| Field::Signed(pick!(r, $i, |d| i64::from(d.mss), i64::from(r.$side.mss_opt))),
            },
            TstatColumn {
                name: concat!($p, "_mss_max"),
                value: |r| {
                    Field::Int(pick!(r, $i, |d| u64::from(d.max_seg_size), seen(r.$side.data_pkts, r.$side.seg_max)))
                },
            },
            TstatColumn {
                name: concat!($p, "_mss_min"),
                value: |r| {
                    Field::Int(pick!(r, $i, |d| u64::from(d.min_seg_size), seen(r.$side.data_pkts, r.$side.seg_min)))
                },
            },
            TstatColumn {
                name: concat!($p, "_win_max"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.win_max), seen(r.$side.pkts, r.$side.win_max))),
            },
            TstatColumn {
                name: concat!($p, "_win_min"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.win_min), seen(r.$side.pkts, r.$side.win_min))),
            },
            TstatColumn {
                name: concat!($p, "_win_0"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.win_zero_ct), r.$side.win_zero)),
            },
            TstatColumn {
                name: concat!($p, "_cwin_max"),
                value: |r| Field::Int(pick!(r, $i, |d| d.cwin_max, r.$side.inflight_max)),
            },
            TstatColumn {
                name: concat!($p, "_cwin_min"),
                value: |r| Field::Int(pick!(r, $i, |d| d.cwin_min, r.$side.inflight_min)),
            },
            TstatColumn {
                name: concat!($p, "_cwin_ini"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.initialwin_bytes), r.$side.inflight_initial)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_rto"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.rtx_rto), r.$side.anomalies.rto)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_fs"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.rtx_fr), r.$side.anomalies.fast_retx)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_reor"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.reordering), r.$side.anomalies.reordering)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_dup"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.net_dup), r.$side.anomalies.net_dup)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_unk"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.unknown), r.$side.anomalies.unknown)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_fc"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.flow_control), r.$side.anomalies.flow_control)),
            },
            TstatColumn {
                name: concat!($p, "_pkts_unrto"),
                value: |r| {
                    Field::Int(pick!(r, $i, |d| u64::from(d.unnecessary_rtx_rto), r.$side.anomalies.unneeded_rto))
                },
            },
            TstatColumn {
                name: concat!($p, "_pkts_unfs"),
                value: |r| {
                    Field::Int(pick!(r, $i, |d| u64::from(d.unnecessary_rtx_fr), r.$side.anomalies.unneeded_fast_retx))
                },
            },
            TstatColumn {
                name: concat!($p, "_syn_retx"),
                value: |r| Field::Int(pick!(r, $i, |d| u64::from(d.bad_behavior), r.$side.syn_retx_new_isn)),
            },
        ]
    };
}

/// A measure taken on packets of one direction: 0 when there were none.
fn seen(pkts: u64, value: impl Into<u64>) -> u64 {
    if pkts == 0 {
        0
    } else {
        value.into()
    }
}

/// The first 44 columns: Tstat's core block, all of `log_tcp_nocomplete`.
pub fn tcp_core_columns() -> Vec<TstatColumn<TcpRecord>> {
    let mut cols: Vec<TstatColumn<TcpRecord>> = vec![
        TstatColumn { name: "c_ip", value: |r| Field::Ip(r.endpoints.client_ip) },
        TstatColumn { name: "c_port", value: |r| Field::Int(u64::from(r.endpoints.client_port)) },
    ];
    cols.extend(tcp_core_dir!("c", client, 0));
    cols.push(TstatColumn { name: "s_ip", value: |r| Field::Ip(r.endpoints.server_ip) });
    cols.push(TstatColumn { name: "s_port", value: |r| Field::Int(u64::from(r.endpoints.server_port)) });
    cols.extend(tcp_core_dir!("s", server, 1));
    cols.extend([
        TstatColumn::<TcpRecord> { name: "first", value: |r| Field::Abs(r.first_ns) },
        TstatColumn { name: "last", value: |r| Field::Abs(last_ns(r)) },
        TstatColumn { name: "durat", value: |r| rel(r, last_ns(r)) },
        TstatColumn {
            name: "c_first",
            value: |r| rel(r, pick!(r, 0, |d| d.payload_start_ns, r.client.first_payload_ns)),
        },
        TstatColumn {
            name: "s_first",
            value: |r| rel(r, pick!(r, 1, |d| d.payload_start_ns, r.server.first_payload_ns)),
        },
        TstatColumn { name: "c_last", value: |r| rel(r, pick!(r, 0, |d| d.payload_end_ns, r.client.last_payload_ns)) },
        TstatColumn { name: "s_last", value: |r| rel(r, pick!(r, 1, |d| d.payload_end_ns, r.server.last_payload_ns)) },
        TstatColumn {
            name: "c_first_ack",
            value: |r| pick!(r, 0, |d| rel(r, d.ack_start_ns), first_ack(r, &r.client)),
        },
        TstatColumn {
            name: "s_first_ack",
            value: |r| pick!(r, 1, |d| rel(r, d.ack_start_ns), first_ack(r, &r.server)),
        },
        TstatColumn { name: "c_isint", value: |r| Field::Int(u64::from(r.endpoints.client_internal)) },
        TstatColumn { name: "s_isint", value: |r| Field::Int(u64::from(r.endpoints.server_internal)) },
        TstatColumn { name: "c_iscrypto", value: |_| Field::Crypto },
        TstatColumn { name: "s_iscrypto", value: |_| Field::Crypto },
        TstatColumn { name: "con_t", value: |r| Field::Int(tcp_con_t(r)) },
        // Tstat's P2P classifier (eMule, BitTorrent… over TCP): sonde has none.
        TstatColumn { name: "p2p_t", value: |_| Field::Int(0) },
        TstatColumn { name: "http_t", value: |r| Field::Int(http_t(r)) },
    ]);
    cols
}

/// Tstat's columns 111-134: HTTP, TLS and DN-Hunter.
fn tcp_layer7_columns() -> Vec<TstatColumn<TcpRecord>> {
    vec![
        TstatColumn::<TcpRecord> {
            name: "http_req_cnt",
            value: |r| Field::Int(tstat_l7(r).map_or(0, |t| u64::from(t.http_requests))),
        },
        TstatColumn {
            name: "http_res_cnt",
            value: |r| Field::Int(tstat_l7(r).map_or(0, |t| u64::from(t.http_responses))),
        },
        TstatColumn { name: "http_res", value: http_res },
        // Tstat's count of PSH-delimited messages per direction (0 without Tstat's state).
        TstatColumn { name: "c_pkts_push", value: |r| Field::Int(tdir(r, 0).map_or(0, |d| u64::from(d.msg_count))) },
        TstatColumn { name: "s_pkts_push", value: |r| Field::Int(tdir(r, 1).map_or(0, |d| u64::from(d.msg_count))) },
        TstatColumn { name: "c_tls_SNI", value: |r| Field::Name(tstat_l7(r).and_then(|t| t.sni.as_deref())) },
        TstatColumn { name: "s_tls_SCN", value: |r| Field::Name(tstat_l7(r).and_then(|t| t.scn.as_deref())) },
        TstatColumn { name: "c_npnalpn", value: |r| Field::Int(tstat_l7(r).map_or(0, |t| u64::from(t.npnalpn[0]))) },
        TstatColumn { name: "s_npnalpn", value: |r| Field::Int(tstat_l7(r).map_or(0, |t| u64::from(t.npnalpn[1]))) },
        // Bits: 1 the ClientHello carried a session id, 2 a PSK, 4 early data; 8 the
        // ServerHello a PSK; 16 it was a HelloRetryRequest.
        TstatColumn {
            name: "tls_session_stat",
            value: |r| Field::Int(tstat_l7(r).map_or(0, |t| u64::from(t.session_bits))),
        },
        // The last packet of each direction before its first application-data record, for a
        // TLS flow.
        TstatColumn {
            name: "c_last_handshakeT",
            value: |r| rel_opt(r, tstat_l7(r).filter(|_| is_tls(r)).map(|t| t.before_data_ns[0])),
        },
        TstatColumn {
            name: "s_last_handshakeT",
            value: |r| rel_opt(r, tstat_l7(r).filter(|_| is_tls(r)).map(|t| t.before_data_ns[1])),
        },
        TstatColumn { name: "c_appdataT", value: |r| rel_opt(r, tstat_l7(r).and_then(|t| t.data_ns[0])) },
        TstatColumn { name: "s_appdataT", value: |r| rel_opt(r, tstat_l7(r).and_then(|t| t.data_ns[1])) },
        // The direction's bytes before the packet of its first application-data record, plus
        // one (Tstat counts from the SYN's sequence number).
        TstatColumn {
            name: "c_appdataB",
            value: |r| Field::Int(tstat_l7(r).filter(|t| t.data_ns[0].is_some()).map_or(0, |t| t.data_bytes[0])),
        },
        TstatColumn {
            name: "s_appdataB",
            value: |r| Field::Int(tstat_l7(r).filter(|t| t.data_ns[1].is_some()).map_or(0, |t| t.data_bytes[1])),
        },
        TstatColumn { name: "fqdn", value: |r| Field::Name(resolved(&r.app).map(|d| &*d.name)) },
        TstatColumn {
            name: "dns_rslv",
            value: |r| resolved(&r.app).map_or(Field::Text("-"), |d| Field::Ip(d.resolver)),
        },
        // The client's last query to the resolver from the same port before the answer.
        TstatColumn {
            name: "req_tm",
            value: |r| resolved(&r.app).map_or(Field::Text("0.0"), |d| Field::Abs(d.query_ns)),
        },
        TstatColumn {
            name: "res_tm",
            value: |r| resolved(&r.app).map_or(Field::Text("0.0"), |d| Field::Abs(d.answer_ns)),
        },
        TstatColumn { name: "http_hostname", value: |r| Field::Name(tstat_l7(r).and_then(|t| t.http_host.as_deref())) },
        TstatColumn { name: "c_TLSvers", value: |r| versions(r, 0) },
        TstatColumn { name: "s_TLSvers", value: |r| versions(r, 1) },
        TstatColumn { name: "dns_enc", value: |r| Field::CryptoIf(resolved(&r.app).is_some()) },
    ]
}

/// A side's TLS versions as Tstat lists them (`-`: no hello read).
fn versions(r: &TcpRecord, side: usize) -> Field<'_> {
    tstat_l7(r).and_then(|t| t.versions[side].as_deref()).map_or(Field::Text("-"), Field::Raw)
}

fn resolved(app: &Option<Box<Facts>>) -> Option<&sonde_l7::Resolved> {
    facts(app).and_then(|f| f.resolved.as_deref())
}

/// `log_tcp_complete`'s 134 columns.
pub fn tcp_complete_columns() -> Vec<TstatColumn<TcpRecord>> {
    let mut cols = tcp_core_columns();
    cols.extend(tcp_e2e_dir!("c", client, 0, tstat_syn_sample));
    cols.extend(tcp_e2e_dir!("s", server, 1, tstat_synack_sample));
    // Tstat's eMule/ED2K block: sonde has no P2P classifier.
    cols.extend([
        TstatColumn::<TcpRecord> { name: "p2p_st", value: |_| Field::Int(0) },
        TstatColumn { name: "ed2k_data", value: |_| Field::Int(0) },
        TstatColumn { name: "ed2k_sig", value: |_| Field::Int(0) },
        TstatColumn { name: "ed2k_c2s", value: |_| Field::Int(0) },
        TstatColumn { name: "ed2k_c2c", value: |_| Field::Int(0) },
        TstatColumn { name: "ed2k_chat", value: |_| Field::Int(0) },
    ]);
    cols.extend(tcp_options_dir!("c", client, 0));
    cols.extend(tcp_options_dir!("s", server, 1));
    cols.extend(tcp_layer7_columns());
    cols
}

/// `log_tcp_nocomplete`'s 44 columns (Tstat's core block).
pub fn tcp_nocomplete_columns() -> Vec<TstatColumn<TcpRecord>> {
    tcp_core_columns()
}

/// Tstat's `c_type`/`s_type` of one direction (`client`: the client's packets).
pub fn udp_flow_type(r: &UdpRecord, client: bool) -> u64 {
    let d = if client { &r.client } else { &r.server };
    if d.pkts == 0 {
        return udp_type::UNKNOWN;
    }
    let Some(app) = facts(&r.app) else { return udp_type::UNKNOWN };
    if let Some(dns) = app.dns.as_deref() {
        let seen = if client { dns.queries } else { dns.responses };
        if seen > 0 {
            return udp_type::DNS;
        }
    }
    if let Some(q) = app.quic.as_deref() {
        let seen = if client { q.client_version } else { q.server_version };
        if seen.is_some() {
            return udp_type::QUIC;
        }
    }
    if let Some(rtp) = app.rtp.as_deref() {
        // Tstat demultiplexes RTP only between ports above 1024.
        let ports = r.endpoints.client_port > 1024 && r.endpoints.server_port > 1024;
        if let (true, Some(Some(stream))) = (ports, rtp.dirs.get(usize::from(!client))) {
            return if stream.packets >= 2 { udp_type::RTP_PLUS } else { udp_type::FIRST_RTP_PLUS };
        }
    }
    udp_type::UNKNOWN
}

fn udp_abs(d: &UdpDirStats) -> Field<'static> {
    if d.pkts == 0 {
        Field::Float(0.0)
    } else {
        Field::Abs(d.first_ns)
    }
}

/// Seconds from a direction's first packet to its last, in whole microseconds.
fn udp_durat(d: &UdpDirStats) -> Field<'static> {
    if d.pkts == 0 {
        return Field::Float(0.0);
    }
    Field::Float(elapsed_ms(d.first_ns, d.last_ns) / 1000.0)
}

/// Tstat prints the QUIC versions and flags only when both directions were QUIC.
fn quic_both(r: &UdpRecord) -> Option<&sonde_l7::QuicFacts> {
    let q = facts(&r.app)?.quic.as_deref()?;
    (udp_flow_type(r, true) == udp_type::QUIC && udp_flow_type(r, false) == udp_type::QUIC).then_some(q)
}

fn quic(r: &UdpRecord) -> Option<&sonde_l7::QuicFacts> {
    facts(&r.app)?.quic.as_deref()
}

macro_rules! udp_dir {
    ($p:literal, $side:ident, $ip:ident, $port:ident, $int:ident, $client:literal) => {
        [
            TstatColumn::<UdpRecord> { name: concat!($p, "_ip"), value: |r| Field::Ip(r.endpoints.$ip) },
            TstatColumn { name: concat!($p, "_port"), value: |r| Field::Int(u64::from(r.endpoints.$port)) },
            TstatColumn { name: concat!($p, "_first_abs"), value: |r| udp_abs(&r.$side) },
            TstatColumn { name: concat!($p, "_durat"), value: |r| udp_durat(&r.$side) },
            TstatColumn { name: concat!($p, "_bytes_all"), value: |r| Field::Int(r.$side.payload_bytes) },
            TstatColumn { name: concat!($p, "_pkts_all"), value: |r| Field::Int(r.$side.pkts) },
            TstatColumn { name: concat!($p, "_isint"), value: |r| Field::Int(u64::from(r.endpoints.$int)) },
            TstatColumn { name: concat!($p, "_iscrypto"), value: |_| Field::Crypto },
            TstatColumn { name: concat!($p, "_type"), value: |r| Field::Int(udp_flow_type(r, $client)) },
        ]
    };
}

/// `log_udp_complete`'s 25 columns.
pub fn udp_complete_columns() -> Vec<TstatColumn<UdpRecord>> {
    let mut cols = Vec::with_capacity(25);
    cols.extend(udp_dir!("c", client, client_ip, client_port, client_internal, true));
    cols.extend(udp_dir!("s", server, server_ip, server_port, server_internal, false));
    cols.extend([
        TstatColumn::<UdpRecord> { name: "fqdn", value: |r| Field::Name(resolved(&r.app).map(|d| &*d.name)) },
        TstatColumn { name: "quic_SNI", value: |r| Field::Name(quic(r).and_then(|q| q.tls.sni.as_deref())) },
        TstatColumn { name: "quic_UA", value: |r| Field::Name(quic(r).and_then(|q| q.user_agent.as_deref())) },
        TstatColumn {
            name: "quic_c_vers",
            value: |r| quic_both(r).and_then(|q| q.client_version).map_or(Field::Text("-"), Field::Hex32),
        },
        TstatColumn {
            name: "quic_s_vers",
            value: |r| quic_both(r).and_then(|q| q.server_version).map_or(Field::Text("-"), Field::Hex32),
        },
        TstatColumn { name: "quic_zero_rtt", value: |r| Field::Int(quic_both(r).map_or(0, |q| u64::from(q.zero_rtt))) },
        TstatColumn { name: "quic_ech", value: |r| Field::Int(quic_both(r).map_or(0, |q| u64::from(q.ech))) },
    ]);
    cols
}

/// The three logs' formats for one run.
pub struct TstatFormats {
    pub complete: TstatFormat<TcpRecord>,
    pub nocomplete: TstatFormat<TcpRecord>,
    pub udp: TstatFormat<UdpRecord>,
}

impl TstatFormats {
    pub fn new(anonymized: bool) -> TstatFormats {
        TstatFormats {
            complete: TstatFormat::new(tcp_complete_columns(), anonymized),
            nocomplete: TstatFormat::new(tcp_nocomplete_columns(), anonymized),
            udp: TstatFormat::new(udp_complete_columns(), anonymized),
        }
    }
}

/// The header line of `log`.
pub fn log_header(log: TstatLog) -> String {
    let prefix = header_prefix(log);
    match log {
        TstatLog::TcpComplete => header(prefix, &tcp_complete_columns()),
        TstatLog::TcpNocomplete => header(prefix, &tcp_nocomplete_columns()),
        TstatLog::UdpComplete => header(prefix, &udp_complete_columns()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_times_carry_tstats_double() {
        // From Tstat's log of groundtruth/mixed.pcap: first = 1795300702508.506104 for a
        // packet at 1795300702.508506 s.
        let ns = 1_795_300_702_508_506_000;
        assert_eq!(format!("{:.6}", abs_ms(ns)), "1795300702508.506104");
        // Nanoseconds below the microsecond are cut, as libpcap hands Tstat microseconds.
        assert_eq!(format!("{:.6}", abs_ms(ns + 999)), "1795300702508.506104");
    }

    #[test]
    fn elapsed_is_whole_microseconds_and_never_negative() {
        assert_eq!(elapsed_ms(1_000_000, 157_223_000), 156.223);
        assert_eq!(elapsed_ms(5_000_000, 0), 0.0);
        assert_eq!(elapsed_ms(1_000, 1_999), 0.0);
    }

    #[test]
    fn names_stay_one_field() {
        let mut buf = Vec::new();
        escape(&mut buf, "a b\tc%d\né");
        assert_eq!(String::from_utf8(buf).unwrap(), "a%20b%09c%25d%0Aé");
        let mut buf = Vec::new();
        put(&mut buf, Field::Name(Some("")), false);
        put(&mut buf, Field::Name(None), false);
        assert_eq!(buf, b"--");
    }

    #[test]
    fn rtt_follows_tstats_formulas() {
        let mut d = TcpDirStats::default();
        for us in [31_608u64, 30_978] {
            d.rtt.add(us * 1_000);
        }
        // The handshake's sample joins the data samples.
        let rtt = Rtt::of_sonde(&d, Some(27_764_400));
        assert_eq!((rtt.count, rtt.min_us, rtt.max_us), (3, 27_764.0, 31_608.0));
        // Tstat's mean divides by n + 0.0001.
        let sum_us = 27_764.0 + 31_608.0 + 30_978.0;
        assert_eq!(rtt.avg_ms(), sum_us / (3.0 + 0.0001) / 1000.0);
        let mean = sum_us / 3.0;
        let var = [27_764.0f64, 31_608.0, 30_978.0].iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 2.0;
        assert!((rtt.std_ms() - var.sqrt() / 1000.0).abs() < 1e-9);
        let two = Rtt::of_sonde(&d, None);
        assert_eq!(two.std_ms(), 0.0, "Tstat's deviation is 0 up to two samples");
        let none = Rtt::of_sonde(&TcpDirStats::default(), None);
        assert_eq!((none.count, none.avg_ms(), none.min_us), (0, 0.0, 0.0));
    }

    #[test]
    fn column_counts_and_headers() {
        assert_eq!(tcp_complete_columns().len(), 134);
        assert_eq!(tcp_nocomplete_columns().len(), 44);
        assert_eq!(udp_complete_columns().len(), 25);
        let h = log_header(TstatLog::TcpComplete);
        assert!(h.starts_with("#15#c_ip:1 c_port:2 c_pkts_all:3 "), "{h}");
        assert!(h.ends_with(" dns_enc:134\n"), "{h}");
        assert!(log_header(TstatLog::UdpComplete).starts_with("#c_ip:1 c_port:2 c_first_abs:3"));
    }
}
