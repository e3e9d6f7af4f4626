//! Drawing a [`LineFigure`]: percentile lines over time on log axes, with shaded bands, unknown
//! bins left as gaps. Shares the time axis, scales and step curves of the traffic figures.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::time::{known_runs, steps, time_chart, TimeFrame, ValueAxis};
use super::{light, text, Scale, FONT, PROTO_COLORS, SERIES_COLORS};
use crate::axis::{log_ticks, si, trim_number, value_ticks, TimeStyle};
use crate::figures::{LineFigure, LinePanel};

/// Colours of the line groups: distinct hues, none a lighter shade of another.
const LINE_COLORS: [RGBColor; 6] =
    [SERIES_COLORS[0], SERIES_COLORS[2], SERIES_COLORS[4], SERIES_COLORS[5], PROTO_COLORS[1], PROTO_COLORS[3]];
/// Stroke width by [`crate::figures::Line::weight`]: p50 thickest.
const WIDTHS: [u32; 3] = [3, 2, 1];

pub(super) fn draw_lines<DB: DrawingBackend>(fig: &LineFigure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let frame = TimeFrame::new(root, &fig.title, &fig.edges, fig.panels.len(), 48)?;
    for (i, (panel, panel_area)) in fig.panels.iter().zip(&frame.panels).enumerate() {
        draw_panel(fig, panel, panel_area, frame.style, frame.x_desc(i))?;
    }
    // One legend under the panels, where it hides no line: each series once, then the note.
    let mut seen: Vec<(&str, usize, usize)> = Vec::new();
    for l in fig.panels.iter().flat_map(|p| &p.lines) {
        if !seen.contains(&(l.label.as_str(), l.color, l.weight)) {
            seen.push((l.label.as_str(), l.color, l.weight));
        }
    }
    let mut x = 70;
    for (label, color, weight) in seen {
        frame.legend.draw(&PathElement::new(vec![(x, 10), (x + 20, 10)], stroke(color, weight))).map_err(text)?;
        frame.legend.draw(&Text::new(label, (x + 26, 3), (FONT, 14))).map_err(text)?;
        x += 46 + 8 * label.chars().count() as i32;
    }
    frame.legend.draw(&Text::new(fig.legend.as_str(), (70, 26), (FONT, 14))).map_err(text)?;
    Ok(())
}

/// A log axis; one spanning less than a decade or so gets round linear steps as ticks, which
/// the 1-2-5 ticks would leave nearly bare.
fn log_scale(lo: f64, hi: f64) -> Scale {
    let ticks = log_ticks(lo, hi);
    if ticks.len() >= 3 {
        return Scale::log_with(lo, hi, ticks);
    }
    Scale::log_with(lo, hi, value_ticks(lo, hi, 5).into_iter().filter(|&t| t > 0.0).collect())
}

fn stroke(color: usize, weight: usize) -> ShapeStyle {
    LINE_COLORS[color % LINE_COLORS.len()].stroke_width(WIDTHS[weight.min(WIDTHS.len() - 1)])
}

/// The smallest and largest positive values of a panel, lines and bands.
fn value_range(panel: &LinePanel) -> (f64, f64) {
    let values = panel.lines.iter().flat_map(|l| {
        l.values.iter().copied().chain(l.band.iter().flat_map(|b| b.iter().flat_map(|&(lo, hi)| [lo, hi])))
    });
    values.filter(|v| v.is_finite() && *v > 0.0).fold((f64::INFINITY, 0.0), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

fn draw_panel<DB: DrawingBackend>(
    fig: &LineFigure,
    panel: &LinePanel,
    area: &DrawingArea<DB, Shift>,
    style: TimeStyle,
    x_desc: Option<&str>,
) -> Result<(), String> {
    let (x0, x1) = (fig.edges[0], fig.edges[fig.edges.len() - 1]);
    if panel.mirrored {
        return draw_mirrored(fig, panel, area, style, x_desc);
    }
    let (lo, hi) = match value_range(panel) {
        (lo, hi) if lo.is_finite() && hi > lo => (lo / 1.5, hi * 1.5),
        (lo, _) if lo.is_finite() => (lo / 10.0, lo * 10.0),
        _ => (0.1, 10.0),
    };
    let caption = format!("{}, {} (log)", panel.caption, panel.unit);
    let y_fmt = |v: &f64| trim_number(*v, 3);
    let y_axis = ValueAxis { scale: log_scale(lo, hi), label: &y_fmt, desc: panel.unit };
    let mut chart = time_chart(area, &caption, (x0, x1), y_axis, style, x_desc)?;

    // Bands first, under every line.
    for line in &panel.lines {
        let Some(band) = &line.band else { continue };
        let color = light(LINE_COLORS[line.color % LINE_COLORS.len()]);
        let both: Vec<f64> =
            band.iter().map(|&(l, h)| if l.is_finite() && h.is_finite() { h } else { f64::NAN }).collect();
        for run in known_runs(&both) {
            let edges = &fig.edges[run.start..=run.end];
            let mut pts = steps(edges, band[run.clone()].iter().map(|b| b.1));
            pts.extend(steps(edges, band[run].iter().map(|b| b.0)).into_iter().rev());
            chart.draw_series(std::iter::once(Polygon::new(pts, color.mix(0.5).filled()))).map_err(text)?;
        }
    }
    draw_line_runs(&mut chart, fig, panel, false)
}

/// A mirrored panel: a linear axis, the lines marked `below` drawn under it; tick labels give
/// magnitudes on both sides (below is a direction, not a negative amount).
fn draw_mirrored<DB: DrawingBackend>(
    fig: &LineFigure,
    panel: &LinePanel,
    area: &DrawingArea<DB, Shift>,
    style: TimeStyle,
    x_desc: Option<&str>,
) -> Result<(), String> {
    let (x0, x1) = (fig.edges[0], fig.edges[fig.edges.len() - 1]);
    let side = |below: bool| {
        panel
            .lines
            .iter()
            .filter(move |l| l.below == below)
            .flat_map(|l| l.values.iter())
            .copied()
            .filter(|v| v.is_finite())
    };
    let (top, bottom) = (side(false).fold(0.0, f64::max), side(true).fold(0.0, f64::max));
    let (top, bottom) = match (top > 0.0, bottom > 0.0) {
        (false, false) => (1.0, 1.0),
        // Each side at least a tenth of the other, so the smaller one stays readable.
        _ => (top.max(bottom * 0.1), bottom.max(top * 0.1)),
    };
    let (lo, hi) = (-bottom * 1.05, top * 1.05);
    let caption = format!("{}, {}", panel.caption, panel.unit);
    let y_fmt = |v: &f64| si(v.abs());
    let y_axis = ValueAxis { scale: Scale::linear(lo, hi, value_ticks(lo, hi, 6)), label: &y_fmt, desc: panel.unit };
    let mut chart = time_chart(area, &caption, (x0, x1), y_axis, style, x_desc)?;
    chart.draw_series(LineSeries::new([(x0, 0.0), (x1, 0.0)], BLACK.stroke_width(1))).map_err(text)?;
    draw_line_runs(&mut chart, fig, panel, true)
}

/// Each line of `panel` as steps over its runs of known values; with `mirrored`, the lines
/// marked `below` are drawn under the axis.
fn draw_line_runs<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<Scale, Scale>>,
    fig: &LineFigure,
    panel: &LinePanel,
    mirrored: bool,
) -> Result<(), String> {
    for line in &panel.lines {
        let stroke = stroke(line.color, line.weight);
        let sign = if mirrored && line.below { -1.0 } else { 1.0 };
        for run in known_runs(&line.values) {
            let edges = &fig.edges[run.start..=run.end];
            let values = line.values[run].iter().map(|v| sign * v);
            chart.draw_series(LineSeries::new(steps(edges, values), stroke)).map_err(text)?;
        }
    }
    Ok(())
}
