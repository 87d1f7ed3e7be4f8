//! Line charts of a simulation, written as SVG and PNG with `plotters`.
//!
//! Text is drawn with a font compiled into the binary (a subset of DejaVu Sans, see
//! `font/LICENSE`), so plots look the same everywhere and need no system font library.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::SimulateError;

/// The embedded font's bytes.
static FONT: &[u8] = include_bytes!("font/DejaVuSans-subset.ttf");

/// Size of every plot (pixels).
const SIZE: (u32, u32) = (960, 540);

/// Colours by series order (sliding log, sliding window, fixed window, token bucket, GCRA,
/// leaky bucket in the default run), chosen to stay apart for colour-blind readers.
const COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

/// One chart: named lines over time, an optional horizontal limit line and a shaded span.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// Shown above the plot.
    pub title: String,
    /// What the y axis counts.
    pub y_label: String,
    /// `(name, points)`; x in seconds from the start.
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
    /// A dashed horizontal line, with its caption.
    pub limit: Option<(f64, String)>,
    /// A shaded span of x (seconds), with its caption.
    pub span: Option<(f64, f64, String)>,
    /// Draw earlier lines wider (for lines expected to coincide).
    pub widen: bool,
    /// Vertical lines at instants of note (a quota's resets), with their labels.
    pub markers: Option<Markers>,
}

/// Vertical lines across a chart, each labelled at the top.
#[derive(Debug, Clone, Default)]
pub struct Markers {
    /// What the lines mark, for the legend.
    pub caption: String,
    /// `(x in seconds from the start, label)`.
    pub at: Vec<(f64, String)>,
}

/// At most this many markers are labelled (every other one, or fewer, past it), so that labels do
/// not overlap; at most this many times as many lines are drawn.
const MARKER_LABELS: usize = 16;

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and known to parse; a failure would only lose the labels.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// The unit the x axis shows for a run of `seconds`: (divisor, name).
fn time_unit(seconds: f64) -> (f64, &'static str) {
    if seconds > 3.0 * 86400.0 {
        (86400.0, "days")
    } else if seconds > 3.0 * 3600.0 {
        (3600.0, "hours")
    } else if seconds > 180.0 {
        (60.0, "minutes")
    } else {
        (1.0, "seconds")
    }
}

/// Writes `stem.svg` and `stem.png` into `dir`.
pub fn write(chart: &Chart, dir: &Path, stem: &str) -> Result<(), SimulateError> {
    register_font();
    let svg = dir.join(format!("{stem}.svg"));
    draw(SVGBackend::new(&svg, SIZE).into_drawing_area(), chart)?;
    let png = dir.join(format!("{stem}.png"));
    draw(BitMapBackend::new(&png, SIZE).into_drawing_area(), chart)?;
    Ok(())
}

/// Headroom above the highest value: room for the legend, and with markers for their labels
/// under it.
fn headroom(chart: &Chart) -> f64 {
    if chart.markers.is_some() { 1.5 } else { 1.15 }
}

/// The markers' lines and labels; only every `step`-th when there are many (days over a year).
/// Labels sit under the legend and above the data (see [`headroom`]), right of their line, or
/// left of it near the right edge so that none is cut.
fn draw_markers<DB: DrawingBackend>(
    plot: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    markers: &Markers,
    (unit, x_end): (f64, f64),
    y_top: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let label_step = markers.at.len().div_ceil(MARKER_LABELS).max(1);
    let line_step = markers.at.len().div_ceil(MARKER_LABELS * 8).max(1);
    let style = ShapeStyle::from(&RGBColor(150, 150, 150)).stroke_width(1);
    let lines = markers
        .at
        .iter()
        .step_by(line_step)
        .map(|(x, _)| PathElement::new(vec![(x / unit, 0.0), (x / unit, y_top)], style));
    plot.draw_series(lines)?
        .label(markers.caption.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x + 9, y - 6), (x + 9, y + 6)], style));
    let font = ("sans-serif", 12).into_font().color(&RGBColor(90, 90, 90));
    let labels = markers.at.iter().step_by(label_step).map(|(x, label)| {
        // Near the right edge a label goes left of its line, and a line lower so that it does
        // not run into the label before it.
        let (side, y) = if *x > 0.95 * x_end {
            (HPos::Right, 0.75)
        } else {
            (HPos::Left, 0.8)
        };
        let font = font.clone().pos(Pos::new(side, VPos::Top));
        Text::new(format!(" {label} "), (x / unit, y_top * y), font)
    });
    plot.draw_series(labels)?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), SimulateError> {
    let fail = |e: DrawingAreaErrorKind<DB::ErrorType>| SimulateError::Plot(format!("{e:?}"));
    root.fill(&WHITE).map_err(fail)?;
    let xs = || {
        chart
            .lines
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.0))
    };
    let x_end = xs().fold(1e-3, f64::max);
    let x_start = xs().fold(x_end, f64::min);
    let (unit, unit_name) = time_unit(x_end);
    let y_top = chart
        .lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .chain(chart.limit.as_ref().map(|l| l.0))
        .fold(1.0, f64::max)
        * headroom(chart);
    let mut plot = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_start / unit..x_end / unit, 0.0..y_top)
        .map_err(fail)?;
    plot.configure_mesh()
        .x_desc(format!("simulated time ({unit_name})"))
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(fail)?;
    if let Some((from, to, caption)) = &chart.span {
        let shade = RGBColor(255, 200, 200).mix(0.5).filled();
        plot.draw_series(std::iter::once(Rectangle::new(
            [(from / unit, 0.0), (to / unit, y_top)],
            shade,
        )))
        .map_err(fail)?
        .label(caption.as_str())
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], shade));
    }
    if let Some((value, caption)) = &chart.limit {
        let style = ShapeStyle::from(&BLACK).stroke_width(2);
        let at = |i: u32| (x_start + (x_end - x_start) * f64::from(i) / 400.0) / unit;
        let dashes = (0..200).map(|i| {
            let (a, b) = (at(2 * i), at(2 * i + 1));
            PathElement::new(vec![(a, *value), (b, *value)], style)
        });
        plot.draw_series(dashes)
            .map_err(fail)?
            .label(caption.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    if let Some(markers) = &chart.markers {
        draw_markers(&mut plot, markers, (unit, x_end), y_top).map_err(fail)?;
    }
    let n = chart.lines.len() as u32;
    for (i, (name, points)) in chart.lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // Earlier lines are wider, so lines that coincide stay visible under later ones.
        let width = if chart.widen {
            2 + 2 * (n - 1 - i as u32)
        } else {
            2
        };
        let style = ShapeStyle::from(&color).stroke_width(width);
        plot.draw_series(LineSeries::new(
            points.iter().map(|&(x, y)| (x / unit, y)),
            style,
        ))
        .map_err(fail)?
        .label(name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    plot.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(fail)?;
    root.present().map_err(fail)?;
    Ok(())
}
