//! The comparison as text for a terminal: the flows, the fields that changed (most changed
//! first), the RTT distributions side by side.

use std::fmt::Write;

use crate::{Comparison, Quantiles};

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
    if !c.distributions.is_empty() {
        let _ = writeln!(
            out,
            "  {:<12} {:>2} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
            "RTT (ms)", "", "flows", "mean", "p5", "p25", "p50", "p75", "p95", "p99", "KS D"
        );
        for d in &c.distributions {
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
    out
}
