use std::path::Path;

use super::*;

const HEADER: &str = "c_ip\tc_port\ts_ip\ts_port\tfirst\tc_pkts_all\tc_rtt_avg\tc_rtt_cnt\ttunnel\n";

fn log(rows: &[&str]) -> FlowLog {
    let text = format!("{HEADER}{}", rows.iter().map(|r| format!("{r}\n")).collect::<String>());
    FlowLog::parse_tsv(Path::new("t.tsv"), text.as_bytes()).unwrap()
}

fn field<'c>(c: &'c Comparison, name: &str) -> &'c FieldChange {
    c.fields.iter().find(|f| f.name == name).unwrap()
}

#[test]
fn a_log_compared_with_itself_changes_nothing() {
    let a = log(&["10.0.0.1\t1\t10.0.0.2\t80\t1.0\t10\t5.0\t2\t-", "10.0.0.3\t2\t10.0.0.2\t80\t2.0\t4\t0.000\t0\t-"]);
    let c = compare(&a, &a).unwrap();
    assert_eq!((c.matched, c.only_a, c.only_b), (2, 0, 0));
    assert!(c.fields.iter().all(|f| f.changed == 0 && f.share == 0.0), "{:?}", c.fields);
    assert_eq!(c.fields.len(), 5, "every column but the endpoints");
    let d = &c.distributions[0];
    assert_eq!((d.name.as_str(), d.a.flows, d.ks_distance), ("c_rtt_avg", 1, 0.0));
}

#[test]
fn changes_are_counted_per_field_with_their_direction() {
    let a = log(&[
        "10.0.0.1\t1\t10.0.0.2\t80\t1.0\t10\t5.0\t2\t-",
        "10.0.0.3\t2\t10.0.0.2\t80\t2.0\t4\t8.0\t1\t-",
        "10.0.0.4\t3\t10.0.0.2\t80\t3.0\t4\t8.0\t1\t-",
        "10.0.0.5\t4\t10.0.0.2\t80\t4.0\t4\t8.0\t1\t-",
    ]);
    let b = log(&[
        "10.0.0.1\t1\t10.0.0.2\t80\t1.0\t5\t6.0\t1\t-",
        "10.0.0.3\t2\t10.0.0.2\t80\t2.0\t4\t8.0\t1\tgre",
        "10.0.0.4\t3\t10.0.0.2\t80\t3.0\t6\t8.0\t1\t-",
        "10.0.0.5\t4\t10.0.0.2\t80\t4.0\t4\t8.0\t1\t-",
    ]);
    let c = compare(&a, &b).unwrap();
    let pkts = field(&c, "c_pkts_all");
    assert_eq!((pkts.changed, pkts.increased, pkts.decreased, pkts.share), (2, 1, 1, 0.5));
    // (5 − 10) / 10 and (6 − 4) / 4.
    assert!((pkts.mean_relative_change.unwrap() - 0.0).abs() < 1e-12);
    let tunnel = field(&c, "tunnel");
    assert_eq!((tunnel.changed, tunnel.increased, tunnel.decreased, tunnel.mean_relative_change), (1, 0, 0, None));
    assert_eq!(field(&c, "first").changed, 0);
    let rtt = field(&c, "c_rtt_avg");
    assert!((rtt.mean_relative_change.unwrap() - 0.2).abs() < 1e-12);
}

#[test]
fn flows_pair_by_endpoints_then_first_time_then_order() {
    // The same endpoints three times in A; B lost the first of them and moved the last's start.
    let a = log(&[
        "10.0.0.1\t1\t10.0.0.2\t53\t1.0\t1\t0\t0\t-",
        "10.0.0.1\t1\t10.0.0.2\t53\t500.0\t2\t0\t0\t-",
        "10.0.0.1\t1\t10.0.0.2\t53\t900.0\t3\t0\t0\t-",
        "10.0.0.9\t9\t10.0.0.2\t53\t1.0\t1\t0\t0\t-",
    ]);
    let b = log(&[
        "10.0.0.1\t1\t10.0.0.2\t53\t500.0\t2\t0\t0\t-",
        "10.0.0.1\t1\t10.0.0.2\t53\t901.0\t3\t0\t0\t-",
        "10.0.0.7\t7\t10.0.0.2\t53\t1.0\t1\t0\t0\t-",
    ]);
    let pairs = pair(&a, &b).unwrap();
    assert_eq!(pairs, vec![(0, 1), (1, 0)], "500 with 500, then 1 with the leftover 901");
    let c = compare(&a, &b).unwrap();
    assert_eq!((c.flows_a, c.flows_b, c.matched, c.only_a, c.only_b), (4, 3, 2, 2, 1));
}

#[test]
fn flows_seen_the_other_way_round_are_counted_as_swapped() {
    let a = log(&["10.0.0.1\t1\t10.0.0.2\t80\t1.0\t1\t0\t0\t-", "10.0.0.3\t3\t10.0.0.2\t80\t1.0\t1\t0\t0\t-"]);
    let b = log(&["10.0.0.2\t80\t10.0.0.1\t1\t2.0\t1\t0\t0\t-", "10.0.0.2\t80\t10.0.0.1\t1\t9.0\t1\t0\t0\t-"]);
    let c = compare(&a, &b).unwrap();
    assert_eq!((c.matched, c.only_a, c.only_b, c.swapped_roles), (0, 2, 2, 1));
    assert!(render_text("TCP flows", &c, false).contains("1 flows of A are in B with client and server swapped"));
}

#[test]
fn quantiles_are_nearest_rank() {
    let values: Vec<f64> = (1..=100).map(f64::from).collect();
    let q = quantiles(&values);
    assert_eq!((q.flows, q.p5, q.p25, q.p50, q.p95, q.p99), (100, 5.0, 25.0, 50.0, 95.0, 99.0));
    assert!((q.mean - 50.5).abs() < 1e-12);
    assert_eq!(quantiles(&[7.0]).p99, 7.0);
    assert_eq!(quantiles(&[]), Quantiles::default());
}

#[test]
fn ks_distance_spans_zero_to_one() {
    assert_eq!(ks_distance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), 0.0);
    assert_eq!(ks_distance(&[1.0, 2.0], &[3.0, 4.0]), 1.0);
    // F_a(2) = 1, F_b(2) = 1/2.
    assert_eq!(ks_distance(&[1.0, 2.0], &[1.0, 3.0]), 0.5);
    assert_eq!(ks_distance(&[], &[1.0]), 0.0);
}

#[test]
fn columns_of_one_side_are_named_not_compared() {
    let a = log(&["10.0.0.1\t1\t10.0.0.2\t80\t1.0\t10\t5.0\t2\t-"]);
    let text = "c_ip\tc_port\ts_ip\ts_port\tfirst\tnew_col\n10.0.0.1\t1\t10.0.0.2\t80\t1.0\tx\n";
    let b = FlowLog::parse_tsv(Path::new("b.tsv"), text.as_bytes()).unwrap();
    let c = compare(&a, &b).unwrap();
    assert_eq!(c.columns_only_a, ["c_pkts_all", "c_rtt_avg", "c_rtt_cnt", "tunnel"]);
    assert_eq!(c.columns_only_b, ["new_col"]);
    assert!(c.distributions.is_empty());
    let text = render_text("TCP flows", &c, true);
    assert!(text.contains("columns only in B: new_col"), "{text}");
}

#[test]
fn a_log_without_endpoints_is_refused() {
    let a = log(&[]);
    let b = FlowLog::parse_tsv(Path::new("b.tsv"), "c_ip\tx\n".as_bytes()).unwrap();
    assert_eq!(compare(&a, &b).unwrap_err().to_string(), "b.tsv: no column c_port (not a sonde flow log?)");
}

#[test]
fn the_text_lists_changed_fields_most_changed_first() {
    let a = log(&["10.0.0.1\t1\t10.0.0.2\t80\t1.0\t10\t5.0\t2\t-", "10.0.0.3\t2\t10.0.0.2\t80\t2.0\t4\t8.0\t1\t-"]);
    let b = log(&["10.0.0.1\t1\t10.0.0.2\t80\t1.0\t9\t5.5\t1\t-", "10.0.0.3\t2\t10.0.0.2\t80\t2.0\t3\t8.0\t1\t-"]);
    let text = render_text("TCP flows", &compare(&a, &b).unwrap(), false);
    let pkts = text.find("c_pkts_all").unwrap();
    let cnt = text.find("c_rtt_cnt").unwrap();
    assert!(pkts < cnt, "{text}");
    assert!(!text.contains("tunnel"), "unchanged fields are left out: {text}");
    assert!(text.contains("100.00%"), "{text}");
}

#[test]
fn durations_and_rtts_per_direction_are_compared() {
    let header = "c_ip\tc_port\ts_ip\ts_port\tfirst\tdurat\tc_rtt_avg\tc_rtt_cnt\tc_isint\ts_isint\n";
    let parse = |rows: &[&str]| {
        let text = format!("{header}{}", rows.iter().map(|r| format!("{r}\n")).collect::<String>());
        FlowLog::parse_tsv(Path::new("t.tsv"), text.as_bytes()).unwrap()
    };
    // Two outbound flows (internal client), one inbound, one between two external hosts.
    let a = parse(&[
        "10.0.0.1\t1\t8.8.8.8\t80\t1.0\t100.0\t5.0\t2\t1\t0",
        "10.0.0.2\t2\t8.8.8.8\t80\t2.0\t0.0\t7.0\t1\t1\t0",
        "8.8.4.4\t3\t10.0.0.9\t22\t3.0\t50.0\t40.0\t3\t0\t1",
        "8.8.4.4\t4\t1.1.1.1\t53\t4.0\t10.0\t9.0\t1\t0\t0",
    ]);
    let b = parse(&[
        "10.0.0.1\t1\t8.8.8.8\t80\t1.0\t90.0\t6.0\t1\t1\t0",
        "10.0.0.2\t2\t8.8.8.8\t80\t2.0\t0.0\t0.0\t0\t1\t0",
        "8.8.4.4\t3\t10.0.0.9\t22\t3.0\t50.0\t40.0\t3\t0\t1",
        "8.8.4.4\t4\t1.1.1.1\t53\t4.0\t10.0\t9.0\t1\t0\t0",
    ]);
    let c = compare(&a, &b).unwrap();
    // Every flow has a duration, a zero one included.
    let durat = c.distributions.iter().find(|d| d.name == "durat").unwrap();
    assert_eq!((durat.a.flows, durat.a.p5, durat.a.p99, durat.b.p99), (4, 0.0, 100.0, 90.0));
    assert_eq!(durat.ks_distance, 0.25);
    let dirs: Vec<_> = c.by_direction.iter().map(|d| (d.direction, d.flows_a, d.flows_b)).collect();
    assert_eq!(dirs, [("outbound", 2, 2), ("inbound", 1, 1)]);
    let out = &c.by_direction[0].distributions[0];
    // Outbound: A's samples 5 and 7, B's only 6 (the second flow lost its sample).
    assert_eq!((out.name.as_str(), out.a.flows, out.b.flows, out.a.mean, out.b.mean), ("c_rtt_avg", 2, 1, 6.0, 6.0));
    let inbound = &c.by_direction[1].distributions[0];
    assert_eq!((inbound.a.mean, inbound.ks_distance), (40.0, 0.0));
    let text = render_text("TCP flows", &c, false);
    assert!(text.contains("outbound flows (A 2, B 2):") && text.contains("inbound flows (A 1, B 1):"), "{text}");
    // Without the direction columns (or internal hosts), no direction is reported.
    assert!(compare(&log(&["10.0.0.1\t1\t10.0.0.2\t80\t1.0\t10\t5.0\t2\t-"]), &log(&[]))
        .unwrap()
        .by_direction
        .is_empty());
}
