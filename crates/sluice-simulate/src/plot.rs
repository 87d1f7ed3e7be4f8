//! Line charts of a simulation, written as SVG and PNG with `plotters`.
//!
//! Text is drawn with a font compiled into the binary (a subset of DejaVu Sans, see
//! `font/LICENSE`), so plots look the same everywhere and need no system font library.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

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
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and known to parse; a failure would only lose the labels.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// The unit the x axis shows for a run of `seconds`: (divisor, name).
fn time_unit(seconds: f64) -> (f64, &'static str) {
    if seconds > 3.0 * 3600.0 {
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
        * 1.15;
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
