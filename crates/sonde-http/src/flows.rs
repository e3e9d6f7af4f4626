//! The flow table's query: filter by address, port and completeness, sort by a column, page.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::snapshot::Table;

/// Largest page served at once.
pub const MAX_LIMIT: usize = 1000;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FlowQuery {
    /// `tcp` (default) or `udp`.
    pub proto: Option<String>,
    pub offset: Option<usize>,
    pub limit: Option<usize>,
    /// A column name; rows keep log order when absent.
    pub sort: Option<String>,
    /// `asc` (default) or `desc`.
    pub order: Option<String>,
    /// Client or server address equal to this text.
    pub addr: Option<String>,
    /// Client or server port.
    pub port: Option<u16>,
    /// TCP only: the `complete` column (handshake seen and closed).
    pub complete: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowPage {
    pub proto: String,
    /// Rows matching the filter, before paging.
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// Why a query was refused (an HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadQuery(pub String);

/// Runs `q` over the table of its protocol.
pub fn query(tcp: &Table, udp: &Table, q: &FlowQuery) -> Result<FlowPage, BadQuery> {
    let proto = q.proto.as_deref().unwrap_or("tcp");
    let table = match proto {
        "tcp" => tcp,
        "udp" => udp,
        other => return Err(BadQuery(format!("proto is tcp or udp, not {other:?}"))),
    };
    let col = |name: &str| table.column(name);
    let ips = [col("c_ip"), col("s_ip")];
    let ports = [col("c_port"), col("s_port")];
    let complete = match q.complete {
        Some(_) if proto == "udp" => return Err(BadQuery("complete applies to tcp flows only".into())),
        Some(want) => Some((col("complete").ok_or_else(|| BadQuery("this log has no complete column".into()))?, want)),
        None => None,
    };
    select(table, proto, ips, ports, complete, q)
}

/// A merged view's flows (`sonde serve --merged`): its host pairs, the matrix of the flow tables
/// (`start end src dst packets bytes flows`, per interval largest first), which `proto=pairs`
/// or no `proto` asks for; filtered by `addr` (source or destination), sorted and paged as a
/// flow log. The merged pairs keep no port, protocol or completeness: asking for them is refused.
pub fn pairs(matrix: &Table, q: &FlowQuery) -> Result<FlowPage, BadQuery> {
    match q.proto.as_deref() {
        None | Some("pairs") => {}
        Some(other) => {
            return Err(BadQuery(format!(
                "a merged view's flows are host pairs across probes (proto=pairs), not {other:?}: ask a probe's \
                 own server for its flow log"
            )))
        }
    }
    if q.port.is_some() || q.complete.is_some() {
        return Err(BadQuery("a merged view's host pairs have no port or complete column".into()));
    }
    let ips = [matrix.column("src"), matrix.column("dst")];
    select(matrix, "pairs", ips, [None, None], None, q)
}

type Pair = [Option<usize>; 2];

/// The page of `table` that `q` asks for, `ips` and `ports` the columns its address and port
/// filters look at.
fn select(
    table: &Table,
    proto: &str,
    ips: Pair,
    ports: Pair,
    complete: Option<(usize, bool)>,
    q: &FlowQuery,
) -> Result<FlowPage, BadQuery> {
    let col = |name: &str| table.column(name);
    let sort = match &q.sort {
        Some(name) => Some(col(name).ok_or_else(|| BadQuery(format!("no column {name:?} to sort by")))?),
        None => None,
    };
    let descending = match q.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => return Err(BadQuery(format!("order is asc or desc, not {other:?}"))),
    };
    let field = |row: usize, col: Option<usize>| col.map_or(Value::Null, |c| table.cell(row, c));
    let matching: Vec<usize> = (0..table.len())
        .filter(|&row| {
            let addr_ok = q.addr.as_deref().is_none_or(|a| ips.iter().any(|&c| text(&field(row, c)) == a));
            let port_ok = q.port.is_none_or(|p| ports.iter().any(|&c| field(row, c).as_u64() == Some(u64::from(p))));
            let complete_ok = complete.is_none_or(|(c, want)| truthy(&table.cell(row, c)) == want);
            addr_ok && port_ok && complete_ok
        })
        .collect();
    let offset = q.offset.unwrap_or(0);
    let limit = q.limit.unwrap_or(100).min(MAX_LIMIT);
    if let Some(col) = sort {
        // Each key read once. Equal keys keep log order (the row breaks ties), so pages do not
        // shuffle between requests. Only the rows up to the page's end are put in order: a
        // selection (linear) then a sort of those, not a sort of the whole log.
        let mut keyed: Vec<(Value, usize)> = matching.iter().map(|&row| (table.cell(row, col), row)).collect();
        let order = |a: &(Value, usize), b: &(Value, usize)| {
            let ord = compare(&a.0, &b.0);
            let ord = if descending { ord.reverse() } else { ord };
            ord.then(a.1.cmp(&b.1))
        };
        let end = offset.saturating_add(limit).min(keyed.len());
        if end == 0 {
            keyed.clear();
        } else {
            if end < keyed.len() {
                keyed.select_nth_unstable_by(end - 1, order);
                keyed.truncate(end);
            }
            keyed.sort_unstable_by(order);
        }
        let page: Vec<usize> = keyed.into_iter().map(|(_, row)| row).skip(offset).collect();
        let rows = page.iter().map(|&row| table.row(row)).collect();
        return Ok(FlowPage {
            proto: proto.into(),
            total: matching.len(),
            offset,
            limit,
            columns: table.columns.clone(),
            rows,
        });
    }
    let rows = matching.iter().skip(offset).take(limit).map(|&row| table.row(row)).collect();
    Ok(FlowPage { proto: proto.into(), total: matching.len(), offset, limit, columns: table.columns.clone(), rows })
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `1`, `true` (TSV and JSONL spell it differently).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

/// Numbers by value, text by text, nulls first.
fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0)),
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (x, y) => text(x).cmp(&text(y)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logs() -> (Table, Table) {
        let tcp = Table::from_tsv(
            "c_ip\tc_port\ts_ip\ts_port\tc_bytes_all\tcomplete\n\
             10.0.0.1\t1000\t10.0.0.2\t80\t300\t1\n\
             10.0.0.3\t1001\t10.0.0.2\t443\t50\t0\n\
             fd77::1\t1002\tfd77::2\t80\t9000\t1\n",
        );
        let udp = Table::from_tsv("c_ip\tc_port\ts_ip\ts_port\n10.0.0.1\t53\t10.0.0.9\t53\n");
        (tcp, udp)
    }

    #[test]
    fn filters_sort_and_pages() {
        let (tcp, udp) = logs();
        let q = |q: FlowQuery| query(&tcp, &udp, &q).unwrap();
        let page = q(FlowQuery { port: Some(80), ..Default::default() });
        assert_eq!(page.total, 2);
        let page = q(FlowQuery { addr: Some("10.0.0.2".into()), complete: Some(false), ..Default::default() });
        assert_eq!(page.rows.len(), 1);
        assert_eq!(page.rows[0][1], Value::from(1001u64));
        let page = q(FlowQuery { sort: Some("c_bytes_all".into()), order: Some("desc".into()), ..Default::default() });
        let bytes: Vec<_> = page.rows.iter().map(|r| r[4].as_u64().unwrap()).collect();
        assert_eq!(bytes, [9000, 300, 50]);
        let page = q(FlowQuery { offset: Some(1), limit: Some(1), sort: Some("c_ip".into()), ..Default::default() });
        assert_eq!((page.total, page.rows.len()), (3, 1));
        assert_eq!(page.rows[0][0], Value::from("10.0.0.3"));
        assert_eq!(q(FlowQuery { proto: Some("udp".into()), ..Default::default() }).total, 1);
    }

    #[test]
    fn a_page_of_the_selection_is_the_page_of_a_stable_sort() {
        let mut tsv = String::from("c_ip\tc_port\ts_ip\ts_port\tc_bytes_all\tcomplete\n");
        for i in 0..500u64 {
            // Many equal keys, and missing values, to test the ties' order.
            let bytes = if i % 7 == 0 { "-".to_string() } else { ((i * 37) % 23).to_string() };
            tsv.push_str(&format!("10.0.{}.{}\t{}\t10.9.9.9\t80\t{bytes}\t1\n", i / 256, i % 256, 1000 + i));
        }
        let (tcp, udp) = (Table::from_tsv(&tsv), Table::from_tsv("c_ip\n"));
        for order in ["asc", "desc"] {
            let all = query(
                &tcp,
                &udp,
                &FlowQuery {
                    sort: Some("c_bytes_all".into()),
                    order: Some(order.into()),
                    limit: Some(MAX_LIMIT),
                    ..Default::default()
                },
            )
            .unwrap();
            // The reference: a stable sort of the whole log.
            let mut rows: Vec<usize> = (0..tcp.len()).collect();
            let col = tcp.column("c_bytes_all").unwrap();
            rows.sort_by(|&a, &b| {
                let o = compare(&tcp.cell(a, col), &tcp.cell(b, col));
                if order == "desc" {
                    o.reverse()
                } else {
                    o
                }
            });
            let expected: Vec<Vec<Value>> = rows.iter().map(|&r| tcp.row(r)).collect();
            assert_eq!(all.rows, expected, "{order}");
            for (offset, limit) in [(0, 10), (37, 25), (490, 25), (600, 5)] {
                let page = query(
                    &tcp,
                    &udp,
                    &FlowQuery {
                        sort: Some("c_bytes_all".into()),
                        order: Some(order.into()),
                        offset: Some(offset),
                        limit: Some(limit),
                        ..Default::default()
                    },
                )
                .unwrap();
                let want: Vec<_> = expected.iter().skip(offset).take(limit).cloned().collect();
                assert_eq!(page.rows, want, "{order} {offset} {limit}");
                assert_eq!(page.total, 500);
            }
        }
    }

    #[test]
    fn bad_queries_are_refused() {
        let (tcp, udp) = logs();
        for bad in [
            FlowQuery { proto: Some("sctp".into()), ..Default::default() },
            FlowQuery { sort: Some("nope".into()), ..Default::default() },
            FlowQuery { order: Some("up".into()), ..Default::default() },
            FlowQuery { proto: Some("udp".into()), complete: Some(true), ..Default::default() },
        ] {
            assert!(query(&tcp, &udp, &bad).is_err(), "{bad:?}");
        }
    }
}
