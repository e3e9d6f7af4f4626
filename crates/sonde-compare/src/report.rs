//! The comparison as text for a terminal: the flows, the fields that changed (most changed
//! first), the RTT and duration distributions side by side, and the RTTs per direction.

use std::fmt::Write;

use crate::{Comparison, Distribution, Quantiles};

/// Renders `c` under the heading `title` (e.g. "TCP flows"); with `all_fields`, unchanged
/// fields are listed too.
pub fn render_text(title: &str, c: &Comparison, all_fields: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{title}: A {} flows, B {} flows; paired {}, only in A {}, only in B {}",
        c.flows_a, c.flows_b, c.matched, c.only_a, c.only_b
    );
    if c.swapped_roles > 0 {
        let _ = writeln!(
            out,
            "  of those unpaired, {} flows of A are in B with client and server swapped",
            c.swapped_roles
        );
    }
    let mut fields: Vec<_> = c.fields.iter().filter(|f| all_fields || f.changed > 0).collect();
    fields.sort_by_key(|f| std::cmp::Reverse(f.changed));
    if fields.is_empty() {
        let _ = writeln!(out, "  no field changed in any paired flow");
    } else {
        let _ = writeln!(
            out,
            "  {:<16} {:>9} {:>8} {:>9} {:>9} {:>12}",
            "field", "changed", "share", "increased", "decreased", "mean rel. Δ"
        );
        for f in fields {
            let relative = f.mean_relative_change.map_or("-".to_string(), |r| format!("{:+.1} %", r * 100.0));
            let _ = writeln!(
                out,
                "  {:<16} {:>9} {:>7.2}% {:>9} {:>9} {:>12}",
                f.name,
                f.changed,
                f.share * 100.0,
                f.increased,
                f.decreased,
                relative
            );
        }
    }
    for (side, columns) in [("A", &c.columns_only_a), ("B", &c.columns_only_b)] {
        if !columns.is_empty() {
            let _ = writeln!(out, "  columns only in {side}: {}", columns.join(" "));
        }
    }
    distribution_rows(&mut out, "value (ms)", &c.distributions);
    for d in &c.by_direction {
        let _ = writeln!(out, "  {} flows (A {}, B {}):", d.direction, d.flows_a, d.flows_b);
        distribution_rows(&mut out, "RTT (ms)", &d.distributions);
    }
    out
}

/// The distributions side by side, A above B, with their KS distance.
fn distribution_rows(out: &mut String, heading: &str, distributions: &[Distribution]) {
    if distributions.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<12} {:>2} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
        heading, "", "flows", "mean", "p5", "p25", "p50", "p75", "p95", "p99", "KS D"
    );
    for d in distributions {
        let row = |side: &str, q: &Quantiles, ks: String| {
            format!(
                "  {:<12} {side:>2} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {ks:>6}\n",
                if side == "A" { d.name.as_str() } else { "" },
                q.flows,
                q.mean,
                q.p5,
                q.p25,
                q.p50,
                q.p75,
                q.p95,
                q.p99
            )
        };
        out.push_str(&row("A", &d.a, String::new()));
        out.push_str(&row("B", &d.b, format!("{:.4}", d.ks_distance)));
    }
}
