//! Drawing the traffic time figures (stacked areas, in above and out below the axis) and the
//! frame, time axis and step curves every time figure shares.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{light, text, Scale, FONT, PROTO_COLORS};
use crate::axis::{si, time_ticks, utc_label, value_ticks, TimeStyle};
use crate::figures::{protos_present, Layout, Panel, TimeFigure, PROTO_LABELS};

pub(super) fn draw_time<DB: DrawingBackend>(fig: &TimeFigure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let frame = TimeFrame::new(root, &fig.title, &fig.edges, fig.panels.len(), 30)?;
    let present = protos_present(fig);
    for (i, (panel, panel_area)) in fig.panels.iter().zip(&frame.panels).enumerate() {
        draw_time_panel(fig, panel, panel_area, frame.style, &present, frame.x_desc(i))?;
    }
    let legend = frame.legend;
    // One legend for the three panels, under them: the protocols, then the directions.
    let mut x = 70;
    for p in (0..4).filter(|&p| present[p]) {
        legend.draw(&Rectangle::new([(x, 8), (x + 14, 22)], light(PROTO_COLORS[p]).filled())).map_err(text)?;
        legend.draw(&Text::new(PROTO_LABELS[p], (x + 20, 8), (FONT, 14))).map_err(text)?;
        x += 30 + 10 * PROTO_LABELS[p].len() as i32;
    }
    legend.draw(&Text::new(fig.directions.as_str(), (x + 20, 8), (FONT, 14))).map_err(text)?;
    Ok(())
}

fn draw_time_panel<DB: DrawingBackend>(
    fig: &TimeFigure,
    panel: &Panel,
    area: &DrawingArea<DB, Shift>,
    style: TimeStyle,
    present: &[bool; 4],
    x_desc: Option<&str>,
) -> Result<(), String> {
    let (x0, x1) = (fig.edges[0], fig.edges[fig.edges.len() - 1]);
    let stacked = |v: &[f64; 4]| v.iter().sum::<f64>();
    let top = panel.above.iter().map(stacked).fold(0.0, f64::max);
    let bottom = panel.below.iter().map(stacked).fold(0.0, f64::max);
    let (top, bottom) = match (top > 0.0, bottom > 0.0, fig.layout == Layout::AllAbove) {
        (false, false, _) => (1.0, 1.0),
        (_, _, true) => (top, 0.0),
        // Each side at least a tenth of the other, so the smaller one stays readable.
        _ => (top.max(bottom * 0.1), bottom.max(top * 0.1)),
    };
    let directions = match fig.layout {
        Layout::InOut { .. } => "   ↑ in   ↓ out",
        Layout::AllAbove => "",
    };
    let y = Scale::linear(-bottom * 1.05, top * 1.05, value_ticks(-bottom * 1.05, top * 1.05, 6));
    let caption = format!("{}, {}{directions}", panel.caption, panel.unit);
    let y_axis = ValueAxis { scale: y, label: &|v| si(*v), desc: panel.unit };
    let mut chart = time_chart(area, &caption, (x0, x1), y_axis, style, x_desc)?;

    // Stacked areas, drawn from the whole stack down so each protocol shows its own layer.
    for (sign, values) in [(1.0, &panel.above), (-1.0, &panel.below)] {
        for p in (0..4).rev().filter(|&p| present[p]) {
            let color = PROTO_COLORS[p];
            let cumulative: Vec<f64> = values.iter().map(|v| sign * v[..=p].iter().sum::<f64>()).collect();
            // Unknown bins (NaN: a store's rows when the probe was not running) are gaps.
            for run in known_runs(&cumulative) {
                let edges = &fig.edges[run.start..=run.end];
                let area = AreaSeries::new(steps(edges, cumulative[run].iter().copied()), 0.0, light(color).filled());
                chart.draw_series(area.border_style(color)).map_err(text)?;
            }
        }
    }
    chart.draw_series(std::iter::once(PathElement::new(vec![(x0, 0.0), (x1, 0.0)], BLACK))).map_err(text)?;
    Ok(())
}

/// The frame of a time figure: a title, panels one above the other sharing the time axis, and
/// a strip under them for the legend.
pub(super) struct TimeFrame<DB: DrawingBackend> {
    pub(super) panels: Vec<DrawingArea<DB, Shift>>,
    pub(super) legend: DrawingArea<DB, Shift>,
    pub(super) style: TimeStyle,
    x_desc: String,
}

impl<DB: DrawingBackend> TimeFrame<DB> {
    pub(super) fn new(
        root: &DrawingArea<DB, Shift>,
        title: &str,
        edges: &[f64],
        panels: usize,
        legend_px: u32,
    ) -> Result<Self, String> {
        let area = root.titled(title, (FONT, 20)).map_err(text)?;
        let (Some(&x0), Some(&x1)) = (edges.first(), edges.last()) else {
            return Err("no bins".to_string());
        };
        if panels == 0 {
            return Err("no panel".to_string());
        }
        let height = area.dim_in_pixel().1;
        let (plots, legend) = area.split_vertically(height.saturating_sub(legend_px));
        Ok(TimeFrame {
            panels: plots.split_evenly((panels, 1)),
            legend,
            style: TimeStyle::for_span(x1 - x0),
            x_desc: format!("time (UTC), from {}", utc_label(x0)),
        })
    }

    /// The time axis' description, under the bottom panel only.
    pub(super) fn x_desc(&self, panel: usize) -> Option<&str> {
        (panel + 1 == self.panels.len()).then_some(self.x_desc.as_str())
    }
}

/// A panel's value axis: its scale, how its labels read, and what it measures.
pub(super) struct ValueAxis<'f> {
    pub scale: Scale,
    pub label: &'f dyn Fn(&f64) -> String,
    pub desc: &'f str,
}

/// One panel of a time figure: the chart over `x0..x1` with its mesh drawn; `x_desc` is given
/// to the bottom panel only, the others share its time axis.
pub(super) fn time_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    (x0, x1): (f64, f64),
    y_axis: ValueAxis<'_>,
    style: TimeStyle,
    x_desc: Option<&str>,
) -> Result<ChartContext<'a, DB, Cartesian2d<Scale, Scale>>, String> {
    let ValueAxis { scale: y, label: y_fmt, desc: y_desc } = y_axis;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 16))
        .margin(6)
        .margin_right(40)
        .x_label_area_size(if x_desc.is_some() { 44 } else { 24 })
        .y_label_area_size(64)
        .build_cartesian_2d(Scale::linear(x0, x1, time_ticks(x0, x1, 10)), y)
        .map_err(text)?;
    let x_fmt = |t: &f64| style.label(*t);
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&x_fmt)
        .y_label_formatter(y_fmt)
        .y_desc(y_desc)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE);
    if let Some(d) = x_desc {
        mesh.x_desc(d);
    }
    mesh.draw().map_err(text)?;
    Ok(chart)
}

/// The runs of consecutive finite values, as index ranges.
pub(super) fn known_runs(values: &[f64]) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, v) in values.iter().enumerate() {
        match (v.is_finite(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    runs.extend(start.map(|s| s..values.len()));
    runs
}

/// Points of a step curve: each value held from its bin's start to its end.
pub(super) fn steps(edges: &[f64], values: impl Iterator<Item = f64>) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    for (i, v) in values.enumerate() {
        pts.push((edges[i], v));
        pts.push((edges[i + 1], v));
    }
    pts
}
