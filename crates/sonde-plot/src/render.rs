//! Drawing the figures with plotters, into a PNG (bitmap backend + `png`) or an SVG string.
//!
//! Text is drawn with DejaVu Sans, embedded in the binary and registered with plotters' ab_glyph
//! font backend, so no font is looked up on the machine.

use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::axis::{duration, duration_ticks, log_ticks, si};
use crate::figures::{DistFigure, LineFigure, PdfFigure, Quantity, TimeFigure};
use crate::periods::PeriodFigure;
use crate::phase::PhaseFigure;

mod lines;
mod periods;
mod time;

/// The image formats `sonde plot` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Svg,
}

impl ImageFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Svg => "svg",
        }
    }
}

/// A figure ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    Time(Box<TimeFigure>),
    /// Percentiles over time.
    Lines(Box<LineFigure>),
    Dist(DistFigure),
    Pdf(PdfFigure),
    /// Tstat's Fig. 2: lifetime survival and throughput pdf.
    Periods(Box<PeriodFigure>),
    /// An association's phase plot (Kitatsuji's Fig. 11).
    Phase(Box<PhaseFigure>),
}

impl Figure {
    pub fn file_stem(&self) -> &str {
        match self {
            Figure::Time(f) => &f.file_stem,
            Figure::Lines(f) => &f.file_stem,
            Figure::Dist(f) => &f.file_stem,
            Figure::Pdf(f) => &f.file_stem,
            Figure::Periods(f) => &f.file_stem,
            Figure::Phase(f) => &f.file_stem,
        }
    }

    /// Width and height in pixels.
    pub fn size(&self) -> (u32, u32) {
        match self {
            Figure::Time(_) => (1200, 900),
            Figure::Lines(f) => (1200, 80 + 300 * f.panels.len().max(1) as u32),
            Figure::Dist(_) => (1200, 520),
            Figure::Pdf(_) => (900, 520),
            Figure::Periods(_) => (1200, 560),
            Figure::Phase(_) => (760, 760),
        }
    }

    /// The encoded image.
    pub fn render(&self, format: ImageFormat) -> Result<Vec<u8>, String> {
        register_fonts()?;
        let (w, h) = self.size();
        match format {
            ImageFormat::Svg => {
                let mut svg = String::new();
                {
                    let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
                    self.draw(&root)?;
                    root.present().map_err(text)?;
                }
                Ok(svg.into_bytes())
            }
            ImageFormat::Png => {
                let mut rgb = vec![0u8; w as usize * h as usize * 3];
                {
                    let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
                    self.draw(&root)?;
                    root.present().map_err(text)?;
                }
                encode_png(&rgb, w, h).map_err(text)
            }
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(text)?;
        match self {
            Figure::Time(f) => time::draw_time(f, root),
            Figure::Lines(f) => lines::draw_lines(f, root),
            Figure::Dist(f) => draw_dist(f, root),
            Figure::Pdf(f) => draw_pdf(f, root),
            Figure::Periods(f) => periods::draw_periods(f, root),
            Figure::Phase(f) => periods::draw_phase(f, root),
        }
    }
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

const FONT: &str = "sans-serif";

fn register_fonts() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        for (style, bytes) in [(FontStyle::Normal, dejavu::sans::regular()), (FontStyle::Bold, dejavu::sans::bold())] {
            plotters::style::register_font(FONT, style, bytes)
                .map_err(|_| "the embedded font is invalid".to_string())?;
        }
        Ok(())
    })
    .clone()
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::High);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

/// Colours of the protocols (tcp, udp, icmp, other) and of up to four distribution series.
const PROTO_COLORS: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(127, 127, 127)];
const SERIES_COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(120, 180, 230),
    RGBColor(214, 39, 40),
    RGBColor(250, 150, 120),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// An axis with the ticks we choose (plotters' own key-point wrapper loses the label formatter).
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

impl Scale {
    fn linear(lo: f64, hi: f64, ticks: Vec<f64>) -> Scale {
        Scale { lo, hi, log: false, ticks }
    }

    /// `0 < lo < hi`; values at or below 0 are drawn at the axis' left or bottom end.
    fn log(lo: f64, hi: f64) -> Scale {
        Scale::log_with(lo, hi, log_ticks(lo, hi))
    }

    fn log_with(lo: f64, hi: f64, ticks: Vec<f64>) -> Scale {
        Scale { lo, hi, log: true, ticks }
    }
}

impl Ranged for Scale {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let (a, b, x) =
            if self.log { (self.lo.ln(), self.hi.ln(), v.max(self.lo * 1e-3).ln()) } else { (self.lo, self.hi, *v) };
        let f = if b > a { (x - a) / (b - a) } else { 0.5 };
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() || hint.max_num_points() == 0 {
            return Vec::new();
        }
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// A series colour lightened towards white, opaque: stacked layers keep their own colour.
fn light(c: RGBColor) -> RGBColor {
    let mix = |v: u8| ((u16::from(v) * 3 + 255) / 4) as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// The most points drawn per distribution curve.
const MAX_CURVE_POINTS: usize = 4000;
/// A CCDF with no more points than this also marks each one (a single value is a single point).
const MARKED_POINTS: usize = 50;

/// The points of a distribution right of a log axis' 0.
fn positive(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    pts.iter().copied().filter(|p| p.0 > 0.0).collect()
}

/// The x range of a distribution figure's log axis: its positive values with a margin (a
/// decade each side of a single value; 0.1 to 10 for none).
fn dist_x_range(fig: &DistFigure) -> (f64, f64) {
    let xs: Vec<f64> = fig.series.iter().flat_map(|s| positive(&s.cdf)).map(|p| p.0).collect();
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(0.0, f64::max);
    if lo.is_finite() && hi > lo {
        (lo / 1.5, hi * 1.5)
    } else if lo.is_finite() {
        (lo / 10.0, lo * 10.0)
    } else {
        (0.1, 10.0)
    }
}

/// A CDF as a step curve up to `hi`: from the share of the values at 0 (left of the axis), a
/// step up at each value.
fn cdf_steps(cdf: &[(f64, f64)], hi: f64) -> Vec<(f64, f64)> {
    let zero_share = cdf.iter().take_while(|p| p.0 <= 0.0).last().map_or(0.0, |p| p.1);
    let mut pts = Vec::new();
    let mut prev = zero_share;
    for (x, f) in crate::dist::thin(&positive(cdf), MAX_CURVE_POINTS) {
        pts.push((x, prev));
        pts.push((x, f));
        prev = f;
    }
    pts.extend(pts.last().map(|&(_, f)| (hi, f)));
    pts
}

/// A CCDF's (thinned) points as a step curve from `lo`: P(X ≥ x) is c_i at x_i and c_{i+1} just
/// above it, a step down at each value; left of the smallest positive value it is that value's
/// share, a flat start at the edge.
fn ccdf_steps(pts_in: &[(f64, f64)], lo: f64) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = pts_in.first().map(|&(_, c)| (lo, c)).into_iter().collect();
    for (k, &(x, c)) in pts_in.iter().enumerate() {
        pts.push((x, c));
        if let Some(&(_, next)) = pts_in.get(k + 1) {
            pts.push((x, next));
        }
    }
    pts
}

fn draw_dist<DB: DrawingBackend>(fig: &DistFigure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let area = root.titled(&fig.title, (FONT, 20)).map_err(text)?;
    let (lo, hi) = dist_x_range(fig);
    let x_fmt = move |v: &f64| match fig.quantity {
        Quantity::Duration => duration(*v),
        Quantity::Bytes => si(*v),
    };
    let x_desc = fig.x_desc.as_str();
    let x_scale = || match fig.quantity {
        Quantity::Duration => Scale::log_with(lo, hi, duration_ticks(lo, hi)),
        Quantity::Bytes => Scale::log(lo, hi),
    };
    let halves = area.split_evenly((1, 2));

    // CDF: log x, linear y.
    let mut cdf = ChartBuilder::on(&halves[0])
        .caption("CDF  P(X ≤ x)", (FONT, 16))
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(x_scale(), 0.0..1.0)
        .map_err(text)?;
    cdf.configure_mesh()
        .x_label_formatter(&x_fmt)
        .y_labels(11)
        .y_label_formatter(&|v| format!("{v:.1}"))
        .x_desc(x_desc)
        .y_desc("fraction of flows")
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE)
        .draw()
        .map_err(text)?;
    for (i, s) in fig.series.iter().enumerate() {
        let color = series_color(i, &s.label);
        cdf.draw_series(LineSeries::new(cdf_steps(&s.cdf, hi), color.stroke_width(2)))
            .map_err(text)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    draw_legend(&mut cdf, SeriesLabelPosition::LowerRight)?;

    // CCDF: log-log.
    let y_min = fig.series.iter().flat_map(|s| s.ccdf.iter().map(|p| p.1)).fold(1.0, f64::min);
    let y_lo = (y_min / 2.0).min(0.05);
    let mut ccdf = ChartBuilder::on(&halves[1])
        .caption("CCDF  P(X ≥ x), log-log", (FONT, 16))
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(x_scale(), Scale::log(y_lo, 1.0))
        .map_err(text)?;
    ccdf.configure_mesh()
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|v| crate::axis::trim_number(*v, 2))
        .x_desc(x_desc)
        .y_desc("fraction of flows")
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE)
        .draw()
        .map_err(text)?;
    for (i, s) in fig.series.iter().enumerate() {
        let color = series_color(i, &s.label);
        let pts_in = crate::dist::thin(&positive(&s.ccdf), MAX_CURVE_POINTS);
        if pts_in.len() <= MARKED_POINTS {
            ccdf.draw_series(pts_in.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(text)?;
        }
        ccdf.draw_series(LineSeries::new(ccdf_steps(&pts_in, lo), color.stroke_width(2)))
            .map_err(text)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    draw_legend(&mut ccdf, SeriesLabelPosition::LowerLeft)?;
    Ok(())
}

/// TCP in blues, UDP in reds; the s2c direction in the lighter shade.
fn series_color(i: usize, label: &str) -> RGBColor {
    let base = if label.starts_with("TCP") {
        0
    } else if label.starts_with("UDP") {
        2
    } else {
        2 * i
    };
    SERIES_COLORS[(base + usize::from(label.contains("s2c"))) % SERIES_COLORS.len()]
}

fn draw_pdf<DB: DrawingBackend>(fig: &PdfFigure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let area = root.titled(&fig.title, (FONT, 18)).map_err(text)?;
    draw_pdf_panel(&area, &fig.series, None, &fig.x_desc, &fig.y_desc)
}

/// A pdf on a log x axis, each series an outlined area.
fn draw_pdf_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[crate::figures::PdfSeries],
    caption: Option<&str>,
    x_desc: &str,
    y_desc: &str,
) -> Result<(), String> {
    // A first bin starting at 0 is drawn from a tenth of its upper edge (log axis).
    let lo_of = |b: &crate::dist::HistBin| if b.lo > 0.0 { b.lo } else { b.hi / 10.0 };
    let bins = || series.iter().flat_map(|s| s.bins.iter());
    let lo = bins().map(lo_of).fold(f64::INFINITY, f64::min);
    let hi = bins().map(|b| b.hi).fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo / 1.25, hi * 1.25) } else { (0.1, 10.0) };
    let top = bins().map(|b| b.fraction).fold(0.0, f64::max).max(1e-3) * 1.3;
    let mut builder = ChartBuilder::on(area);
    if let Some(caption) = caption {
        builder.caption(caption, (FONT, 16));
    }
    let mut chart = builder
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(Scale::log(lo, hi), 0.0..top)
        .map_err(text)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| si(*v))
        .y_label_formatter(&|v| crate::axis::trim_number(*v, 2))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE)
        .draw()
        .map_err(text)?;
    for (i, s) in series.iter().enumerate() {
        let color = SERIES_COLORS[(2 * i) % SERIES_COLORS.len()];
        // One outline: down to 0 only between bins that do not touch (sparse histograms).
        let mut pts: Vec<(f64, f64)> = Vec::new();
        let mut prev_hi: Option<f64> = None;
        for b in &s.bins {
            let b_lo = lo_of(b);
            if prev_hi.is_none_or(|h| b_lo > h * (1.0 + 1e-9)) {
                pts.extend(prev_hi.map(|h| (h, 0.0)));
                pts.push((b_lo, 0.0));
            }
            pts.push((b_lo, b.fraction));
            pts.push((b.hi, b.fraction));
            prev_hi = Some(b.hi);
        }
        pts.extend(prev_hi.map(|h| (h, 0.0)));
        chart
            .draw_series(AreaSeries::new(pts, 0.0, color.mix(0.35)).border_style(color.stroke_width(2)))
            .map_err(text)?
            .label(s.label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.mix(0.6).filled()));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    Ok(())
}

/// The series' legend, in a corner, as every figure draws it.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font((FONT, 12))
        .draw()
        .map_err(text)
}
