//! The phase plot of an association (Kitatsuji et al.'s Fig. 11): each A→B gap against the
//! next one of the same association, e.g. RTT sample n against n + 1 of `assoc data -> ack`,
//! from `definition_association_samples.tsv` (the samples one by one, in the order taken, as
//! many as `--association-samples` kept) and `definition_associations.tsv` (how many were taken
//! in all).

use std::path::Path;

use crate::error::PlotError;
use crate::table::Tsv;

/// One association's samples as written.
#[derive(Debug, Clone, PartialEq)]
pub struct AssociationSamples {
    pub name: String,
    /// A→B gaps in ms, by `n`.
    pub gaps_ms: Vec<f64>,
}

/// Reads `definition_association_samples.tsv`: per association in the file's order, its gaps
/// by `n` (which must run 1, 2, 3 … within an association).
pub fn read_samples(path: &Path) -> Result<Vec<AssociationSamples>, PlotError> {
    parse_samples(Tsv::open(path)?)
}

pub(crate) fn parse_samples<R: std::io::Read>(tsv: Tsv<R>) -> Result<Vec<AssociationSamples>, PlotError> {
    let (name, n, gap) = (tsv.column("association")?, tsv.column("n")?, tsv.column("gap_ms")?);
    let mut out: Vec<AssociationSamples> = Vec::new();
    tsv.for_each_row(|r| {
        let this = r.text(name);
        if out.last().is_none_or(|a| a.name != this) {
            if out.iter().any(|a| a.name == this) {
                return Err(r.error(format!("association `{this}` again after others: rows out of order")));
            }
            out.push(AssociationSamples { name: this.to_string(), gaps_ms: Vec::new() });
        }
        let a = out.last_mut().ok_or_else(|| r.error("no association".to_string()))?;
        let k = r.number(n, "n")?;
        if k != (a.gaps_ms.len() + 1) as f64 {
            return Err(r.error(format!("n is {k}, expected {} for `{}`", a.gaps_ms.len() + 1, a.name)));
        }
        a.gaps_ms.push(r.number(gap, "gap_ms")?);
        Ok(())
    })?;
    Ok(out)
}

/// Per association in `definition_associations.tsv`: (samples taken, samples not written).
pub fn read_totals(path: &Path) -> Result<Vec<(String, u64, u64)>, PlotError> {
    let tsv = Tsv::open(path)?;
    let (name, samples) = (tsv.column("association")?, tsv.column("samples")?);
    let unwritten = tsv.optional_column("samples_unwritten");
    let mut out = Vec::new();
    tsv.for_each_row(|r| {
        let left = unwritten.map(|c| r.number(c, "samples_unwritten")).transpose()?.unwrap_or(0.0);
        out.push((r.text(name).to_string(), r.number(samples, "samples")? as u64, left as u64));
        Ok(())
    })?;
    Ok(out)
}

/// A phase plot: consecutive gaps as points.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseFigure {
    pub title: String,
    pub file_stem: String,
    pub association: String,
    /// `(gap n, gap n + 1)` in ms, n = 1 … samples − 1.
    pub points: Vec<(f64, f64)>,
    /// The smallest gap (the minimum RTT of an RTT association), ms.
    pub min_ms: f64,
    /// Under the plot: how many samples, and whether some were not written.
    pub note: String,
}

/// The phase plot of `a`, with `totals` from `definition_associations.tsv` when given; `Err`
/// with the reason when it has fewer than two samples.
pub fn phase_figure(
    a: &AssociationSamples,
    totals: Option<(u64, u64)>,
    dir_label: &str,
) -> Result<PhaseFigure, String> {
    if a.gaps_ms.len() < 2 {
        return Err(format!(
            "no phase plot of association `{}`: {} sample{} written, 2 needed",
            a.name,
            a.gaps_ms.len(),
            if a.gaps_ms.len() == 1 { "" } else { "s" }
        ));
    }
    let points: Vec<(f64, f64)> = a.gaps_ms.windows(2).map(|w| (w[0], w[1])).collect();
    let min_ms = a.gaps_ms.iter().copied().fold(f64::INFINITY, f64::min);
    let written = a.gaps_ms.len();
    let note = match totals {
        Some((taken, unwritten)) if unwritten > 0 => format!(
            "the first {written} of {taken} samples (definition_association_samples.tsv; {unwritten} past \
             --association-samples not written); {} points; dashed: gap n+1 = gap n; dotted: the smallest gap, {} ms",
            points.len(),
            crate::axis::trim_number(min_ms, 4)
        ),
        _ => format!(
            "all {written} samples (definition_association_samples.tsv); {} points; dashed: gap n+1 = gap n; dotted: \
             the smallest gap, {} ms",
            points.len(),
            crate::axis::trim_number(min_ms, 4)
        ),
    };
    // File names keep to letters, digits, `-` and `_` (definition names already do).
    let stem: String = a.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    Ok(PhaseFigure {
        title: format!("{dir_label}: phase plot of association `{}`, gap n against gap n+1", a.name),
        file_stem: format!("phase-{stem}"),
        association: a.name.clone(),
        points,
        min_ms,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<AssociationSamples>, PlotError> {
        parse_samples(Tsv::new(Path::new("s.tsv"), text.as_bytes()).unwrap())
    }

    #[test]
    fn consecutive_gaps_become_points() {
        let text = "association\tn\tanswered\tgap_ms\n\
                    rtt\t1\t10.000000001\t8.3\nrtt\t2\t10.1\t9.0\nrtt\t3\t10.2\t8.4\n\
                    syn_fin\t1\t11.0\t1000.0\n";
        let a = parse(text).unwrap();
        assert_eq!(a.len(), 2);
        let fig = phase_figure(&a[0], Some((5, 2)), "t").unwrap();
        assert_eq!(fig.points, [(8.3, 9.0), (9.0, 8.4)]);
        assert_eq!((fig.min_ms, fig.file_stem.as_str()), (8.3, "phase-rtt"));
        assert!(fig.note.starts_with("the first 3 of 5 samples"), "{}", fig.note);
        let e = phase_figure(&a[1], None, "t").unwrap_err();
        assert_eq!(e, "no phase plot of association `syn_fin`: 1 sample written, 2 needed");
    }

    #[test]
    fn rows_out_of_order_are_errors_naming_the_line() {
        let gap = "association\tn\tanswered\tgap_ms\nrtt\t1\t1.0\t1\nrtt\t3\t1.0\t1\n";
        assert_eq!(parse(gap).unwrap_err().to_string(), "s.tsv:3: n is 3, expected 2 for `rtt`");
        let again = "association\tn\tanswered\tgap_ms\na\t1\t1.0\t1\nb\t1\t1.0\t1\na\t2\t1.0\t1\n";
        assert!(parse(again).unwrap_err().to_string().starts_with("s.tsv:4: association `a` again"));
    }
}
