//! Drawing Tstat's Fig. 2 ([`PeriodFigure`]: the lifetime's survival function beside the
//! throughput pdf) and an association's phase plot ([`PhaseFigure`]).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{draw_legend, draw_pdf_panel, text, Scale, FONT, SERIES_COLORS};
use crate::axis::{duration, duration_ticks, trim_number, value_ticks};
use crate::periods::PeriodFigure;
use crate::phase::PhaseFigure;

/// Most points drawn per survival curve (the shares are computed over every flow).
const MAX_CURVE_POINTS: usize = 4000;

pub(super) fn draw_periods<DB: DrawingBackend>(
    fig: &PeriodFigure,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let area = root.titled(&fig.title, (FONT, 18)).map_err(text)?;
    let (plots, note) = area.split_vertically(area.dim_in_pixel().1.saturating_sub(40));
    let halves = plots.split_evenly((1, 2));

    // Survival, log-log: values of 0 s cannot show (their share is in every point).
    let xs = fig.survival.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|x| *x > 0.0);
    let (lo, hi) = xs.fold((f64::INFINITY, 0.0_f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo / 1.5, hi * 1.5) } else { (0.001, 10.0) };
    let y_min = fig.survival.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|y| *y > 0.0).fold(1.0, f64::min);
    let y_lo = (y_min / 2.0).min(0.05);
    let mut chart = ChartBuilder::on(&halves[0])
        .caption("Flow lifetime: survival  P(X > x), log-log", (FONT, 16))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(Scale::log_with(lo, hi, duration_ticks(lo, hi)), Scale::log(y_lo, 1.0))
        .map_err(text)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| duration(*v))
        .y_label_formatter(&|v| trim_number(*v, 2))
        .x_desc("flow lifetime (durat)")
        .y_desc("fraction of flows lasting longer")
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE)
        .draw()
        .map_err(text)?;
    for (i, s) in fig.survival.iter().enumerate() {
        let color = SERIES_COLORS[(2 * i) % SERIES_COLORS.len()];
        // P(X > x) holds from one value to the next, then steps down; the last step (to 0)
        // goes to the bottom of the axis.
        let positive: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| p.0 > 0.0).collect();
        let thinned = crate::dist::thin(&positive, MAX_CURVE_POINTS);
        let start = s.points.iter().take_while(|p| p.0 <= 0.0).last().map_or(1.0, |p| p.1);
        let mut pts = vec![(lo, start)];
        let mut prev = start;
        for &(x, p) in &thinned {
            pts.push((x, prev));
            let y = if p > 0.0 { p } else { y_lo };
            pts.push((x, y));
            prev = y;
        }
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(text)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerLeft)?;

    draw_pdf_panel(
        &halves[1],
        &fig.thru,
        Some("Per-flow throughput: pdf"),
        "throughput (bit/s), c2s and s2c",
        "share of TCP directions per bin (10 per decade)",
    )?;
    draw_note(&note, &fig.note, 175)
}

/// `note` in lines of at most about `width` characters, broken between words.
fn draw_note<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, note: &str, width: usize) -> Result<(), String> {
    let mut lines: Vec<String> = vec![String::new()];
    for word in note.split(' ') {
        let last = lines.last_mut().map_or(0, |l| l.chars().count());
        if last > 0 && last + 1 + word.chars().count() > width {
            lines.push(String::new());
        }
        if let Some(l) = lines.last_mut() {
            if !l.is_empty() {
                l.push(' ');
            }
            l.push_str(word);
        }
    }
    for (i, line) in lines.iter().enumerate() {
        area.draw(&Text::new(line.as_str(), (20, 2 + 16 * i as i32), (FONT, 12))).map_err(text)?;
    }
    Ok(())
}

pub(super) fn draw_phase<DB: DrawingBackend>(fig: &PhaseFigure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let area = root.titled(&fig.title, (FONT, 16)).map_err(text)?;
    let (plot, note) = area.split_vertically(area.dim_in_pixel().1.saturating_sub(44));
    // The same range on both axes: linear, as Kitatsuji's, when the gaps span less than a
    // decade; log-log when they span more (a whole run's RTTs: µs on a LAN to seconds).
    let values = fig.points.iter().flat_map(|p| [p.0, p.1]).filter(|v| *v > 0.0);
    let (lo, hi) = values.fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let scale = if !lo.is_finite() || hi <= lo {
        Scale::log(0.01, 100.0)
    } else if hi < 10.0 * lo {
        let pad = (hi - lo) * 0.05;
        let (lo, hi) = ((lo - pad).max(0.0), hi + pad);
        Scale::linear(lo, hi, value_ticks(lo, hi, 8))
    } else {
        Scale::log(lo / 1.5, hi * 1.5)
    };
    let (lo, hi) = (scale.lo, scale.hi);
    let same = || Scale { lo: scale.lo, hi: scale.hi, log: scale.log, ticks: scale.ticks.clone() };
    let mut chart = ChartBuilder::on(&plot)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(same(), same())
        .map_err(text)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| trim_number(*v, 3))
        .y_label_formatter(&|v| trim_number(*v, 3))
        .x_desc("gap n (ms)")
        .y_desc("gap n+1 (ms)")
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE)
        .draw()
        .map_err(text)?;
    let grey = BLACK.mix(0.45);
    // The diagonal: gap n+1 = gap n.
    let diagonal = DashedLineSeries::new([(lo, lo), (hi, hi)], 6, 4, grey.stroke_width(1));
    chart.draw_series(diagonal).map_err(text)?;
    // The smallest gap on both axes (Kitatsuji's minimum RTT realm starts there).
    for line in [[(fig.min_ms, lo), (fig.min_ms, hi)], [(lo, fig.min_ms), (hi, fig.min_ms)]] {
        chart.draw_series(DashedLineSeries::new(line, 2, 3, grey.stroke_width(1))).map_err(text)?;
    }
    let color = SERIES_COLORS[0].mix(0.55);
    let radius = if fig.points.len() > 2000 { 1 } else { 2 };
    chart.draw_series(fig.points.iter().map(|&p| Circle::new(p, radius, color.filled()))).map_err(text)?;
    draw_note(&note, &fig.note, 105)
}
