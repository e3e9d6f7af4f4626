//! Drawing a [`LineFigure`]: percentile lines over time on log axes, with shaded bands, unknown
//! bins left as gaps. Shares the time axis, scales and step curves of the traffic figures.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{known_runs, light, steps, text, Scale, FONT, PROTO_COLORS, SERIES_COLORS};
use crate::axis::{time_ticks, trim_number, utc_label, TimeStyle};
use crate::figures::{LineFigure, LinePanel};

/// Colours of the line groups: distinct hues, none a lighter shade of another.
const LINE_COLORS: [RGBColor; 6] =
    [SERIES_COLORS[0], SERIES_COLORS[2], SERIES_COLORS[4], SERIES_COLORS[5], PROTO_COLORS[1], PROTO_COLORS[3]];
/// Stroke width by [`crate::figures::Line::weight`]: p50 thickest.
const WIDTHS: [u32; 3] = [3, 2, 1];

pub(super) fn draw_lines<DB: DrawingBackend>(fig: &LineFigure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let area = root.titled(&fig.title, (FONT, 20)).map_err(text)?;
    let (Some(&x0), Some(&x1)) = (fig.edges.first(), fig.edges.last()) else {
        return Err("no bins".to_string());
    };
    if fig.panels.is_empty() {
        return Err("no panel".to_string());
    }
    let style = TimeStyle::for_span(x1 - x0);
    let x_desc = format!("time (UTC), from {}", utc_label(x0));
    let height = area.dim_in_pixel().1;
    let (plots, legend) = area.split_vertically(height.saturating_sub(30));
    let areas = plots.split_evenly((fig.panels.len(), 1));
    for (i, (panel, panel_area)) in fig.panels.iter().zip(&areas).enumerate() {
        let last = i + 1 == fig.panels.len();
        draw_panel(fig, panel, panel_area, style, last.then_some(x_desc.as_str()))?;
    }
    legend.draw(&Text::new(fig.legend.as_str(), (70, 8), (FONT, 14))).map_err(text)?;
    Ok(())
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
    let (lo, hi) = match value_range(panel) {
        (lo, hi) if lo.is_finite() && hi > lo => (lo / 1.5, hi * 1.5),
        (lo, _) if lo.is_finite() => (lo / 10.0, lo * 10.0),
        _ => (0.1, 10.0),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{}, {} (log)", panel.caption, panel.unit), (FONT, 16))
        .margin(6)
        .margin_right(40)
        .x_label_area_size(if x_desc.is_some() { 44 } else { 24 })
        .y_label_area_size(64)
        .build_cartesian_2d(Scale::linear(x0, x1, time_ticks(x0, x1, 10)), Scale::log(lo, hi))
        .map_err(text)?;
    let x_fmt = |t: &f64| style.label(*t);
    let y_fmt = |v: &f64| trim_number(*v, 3);
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .y_desc(panel.unit)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE);
    if let Some(d) = x_desc {
        mesh.x_desc(d);
    }
    mesh.draw().map_err(text)?;

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
    for line in &panel.lines {
        let color = LINE_COLORS[line.color % LINE_COLORS.len()];
        let stroke = color.stroke_width(WIDTHS[line.weight.min(WIDTHS.len() - 1)]);
        for run in known_runs(&line.values) {
            let edges = &fig.edges[run.start..=run.end];
            chart.draw_series(LineSeries::new(steps(edges, line.values[run].iter().copied()), stroke)).map_err(text)?;
        }
        // An empty series carries the legend entry, whatever the runs.
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())
            .map_err(text)?
            .label(line.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], stroke));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font((FONT, 12))
        .draw()
        .map_err(text)?;
    Ok(())
}
