//! Line plots as PNG (e.g. residual versus iteration, one curve per solver), drawn with the
//! [`plotters`] crate on its bitmap backend: a title, labelled axes (put the unit in the label,
//! e.g. `"wall time [ms]"`), a linear or log₁₀ y axis with decade ticks (`10⁻⁸`) and minor grid
//! lines, a legend beside the plot, dashed horizontal reference lines (a tolerance, say), and
//! antialiased text in DejaVu Sans.
//!
//! Text is laid out and rasterised here (module `text`) with the pure-Rust `ab_glyph` from a
//! font embedded in the library (`assets/fonts/DejaVuSans.ttf`, Bitstream Vera licence beside
//! it), so plots look the same on every machine and need no system font, fontconfig or
//! freetype; plotters draws the grid, curves, markers and frame.
//!
//! Build cost, measured clean in release (`cargo build --release` of a crate depending on just
//! `plotters` with `bitmap_backend` and `ab_glyph`): 7 crates new to jello's tree (plotters,
//! plotters-backend, plotters-bitmap, ab_glyph, ab_glyph_rasterizer, owned_ttf_parser,
//! ttf-parser), 12.7 s user + 1.2 s system CPU. That is small beside jello's ~300 other crates
//! (wgpu, naga, faer), so the dependency is not behind a feature. The embedded font adds
//! 0.76 MB to binaries that draw a plot.
//!
//! The x axis is the sample index (0, 1, 2, ...), or named categories
//! ([`PlotSpec::x_categories`], e.g. one scene per tick). Points that cannot be drawn (non-finite, or
//! ≤ 0 on a log axis) are skipped and break their curve; a point with no drawable neighbour,
//! and every point of a short series, gets a round marker so a one-sample curve still shows.
//! Empty series and series with nothing drawable are listed in the legend and draw nothing. A
//! log axis spans at most [`MAX_DECADES`]; curves going below it are cut where they leave it.
//! Errors ([`JelloError::Invalid`]): an image size out of range, and a linear y range wider
//! than `f64` holds (e.g. ±`f64::MAX`; a log axis takes it). Nothing panics on bad samples.

use super::atomic_write;
use crate::error::{JelloError, Result};
use crate::render::text::{self, Align, Label};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use std::ops::Range;
use std::path::Path;

/// One curve: `y[i]` is plotted at `x = i`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Legend text (any Unicode DejaVu Sans covers; shortened with `…` if it does not fit).
    pub name: String,
    /// Samples; non-finite values (and values ≤ 0 on a log axis) are skipped.
    pub y: Vec<f64>,
}

impl Series {
    /// A named series.
    pub fn new(name: impl Into<String>, y: Vec<f64>) -> Self {
        Series {
            name: name.into(),
            y,
        }
    }
}

/// What to draw around the curves. `Default` gives an untitled 800×500 log-y plot.
#[derive(Clone, Copy, Debug)]
pub struct PlotSpec<'a> {
    /// Text centred above the plot; empty for none.
    pub title: &'a str,
    /// Text under the x axis, with its unit (e.g. `"iteration"`, `"time [ms]"`); empty for none.
    pub x_label: &'a str,
    /// Text beside the y axis (drawn rotated), with its unit; empty for none.
    pub y_label: &'a str,
    /// Log₁₀ y axis with decade ticks (clamped to [`MAX_DECADES`] below the largest value).
    pub log_y: bool,
    /// Image width in pixels, [`MIN_WIDTH`]..=[`MAX_SIDE`].
    pub width: u32,
    /// Image height in pixels, [`MIN_HEIGHT`]..=[`MAX_SIDE`].
    pub height: u32,
    /// Horizontal reference lines `(y, label)`, drawn dashed; they count towards the y range.
    /// Non-finite ones (and ones ≤ 0 on a log axis) are ignored.
    pub hlines: &'a [(f64, &'a str)],
    /// Categorical x axis: when non-empty, sample `i` of every series sits at the tick labelled
    /// `x_categories[i]` (e.g. one scene per tick) instead of at the number `i`; samples beyond
    /// the list are not drawn. Empty (the default): the x axis is the sample index.
    pub x_categories: &'a [&'a str],
}

impl Default for PlotSpec<'_> {
    fn default() -> Self {
        PlotSpec {
            title: "",
            x_label: "",
            y_label: "",
            log_y: true,
            width: 800,
            height: 500,
            hlines: &[],
            x_categories: &[],
        }
    }
}

/// Smallest accepted image width.
pub const MIN_WIDTH: u32 = 160;
/// Smallest accepted image height.
pub const MIN_HEIGHT: u32 = 120;
/// Largest accepted image side.
pub const MAX_SIDE: u32 = 8192;
/// A log axis spans at most this many decades; smaller values are clipped at the bottom.
pub const MAX_DECADES: i32 = 16;

/// Series colours, in order; series `i` gets `PALETTE[i % PALETTE.len()]` (matplotlib's
/// "tab10", so plots read like the Python ones next to them).
pub const PALETTE: [[u8; 3]; 10] = [
    [31, 119, 180],  // blue
    [255, 127, 14],  // orange
    [44, 160, 44],   // green
    [214, 39, 40],   // red
    [148, 103, 189], // purple
    [140, 86, 75],   // brown
    [227, 119, 194], // pink
    [23, 190, 207],  // cyan
    [188, 189, 34],  // olive
    [0, 0, 128],     // navy
];

/// The colour of series number `i`.
pub fn series_color(i: usize) -> [u8; 3] {
    PALETTE[i % PALETTE.len()]
}

/// The plot frame in pixel coordinates (inclusive; the frame lines lie on these rows and
/// columns). Curves, grid and reference lines are drawn strictly inside; the legend, ticks and
/// labels outside (the legend to the right of `right`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlotArea {
    /// Column of the left frame line.
    pub left: u32,
    /// Row of the top frame line.
    pub top: u32,
    /// Column of the right frame line.
    pub right: u32,
    /// Row of the bottom frame line.
    pub bottom: u32,
}

/// A rendered plot before PNG encoding: 8-bit RGB rows, top to bottom.
#[derive(Clone, Debug)]
pub struct PlotImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `3 * width * height` bytes.
    pub rgb: Vec<u8>,
    /// Where the data lives.
    pub area: PlotArea,
}

impl PlotImage {
    /// The colour at `(x, y)`; panics outside the image.
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        assert!(x < self.width && y < self.height, "pixel out of range");
        let i = 3 * (y as usize * self.width as usize + x as usize);
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Encodes as an 8-bit RGB PNG.
    pub fn to_png(&self) -> Result<Vec<u8>> {
        let err = |e: png::EncodingError| JelloError::Invalid(format!("plot: png encoding: {e}"));
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, self.width, self.height);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut writer = enc.write_header().map_err(err)?;
            writer.write_image_data(&self.rgb).map_err(err)?;
            writer.finish().map_err(err)?;
        }
        Ok(out)
    }
}

/// Renders the plot and returns PNG bytes.
pub fn render_plot(spec: &PlotSpec, series: &[Series]) -> Result<Vec<u8>> {
    render_image(spec, series)?.to_png()
}

/// Renders the plot and writes it to `path` as PNG, atomically (a reader never sees half a
/// file); creates missing parent folders.
pub fn write_plot(path: &Path, spec: &PlotSpec, series: &[Series]) -> Result<()> {
    atomic_write(path, &render_plot(spec, series)?)
}

const INK_RGB: [u8; 3] = [30, 30, 30];
const REFERENCE_RGB: [u8; 3] = [90, 90, 90];
const FRAME: RGBColor = RGBColor(60, 60, 60);
const GRID: RGBColor = RGBColor(222, 222, 222);
const GRID_MINOR: RGBColor = RGBColor(240, 240, 240);
const REFERENCE: RGBColor = RGBColor(90, 90, 90);
/// Series of at most this many samples get a marker on every point (Newton's handful of
/// iterations reads better as dots on a line); longer ones only on isolated points.
const MARKERS_UP_TO: usize = 30;
const LEGEND_BORDER: RGBColor = RGBColor(200, 200, 200);

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> JelloError {
    JelloError::Invalid(format!("plot: drawing: {e}"))
}

/// The y axis in plotting coordinates: `u = log10(y)` on a log axis, `u = y` otherwise.
struct YAxis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl YAxis {
    /// `y` in axis coordinates, or `None` if it cannot be drawn (before clipping to the range).
    fn map(&self, y: f64) -> Option<f64> {
        match (self.log, y.is_finite()) {
            (_, false) => None,
            (true, _) if y <= 0.0 => None,
            (true, _) => Some(y.log10()),
            (false, _) => Some(y),
        }
    }

    /// The range of all drawable samples and reference lines, padded so nothing touches the
    /// frame; at least one whole decade on a log axis.
    fn fit(log: bool, values: impl Iterator<Item = f64>) -> Result<Self> {
        let probe = YAxis {
            log,
            lo: 0.0,
            hi: 0.0,
        };
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for u in values.filter_map(|y| probe.map(y)) {
            lo = lo.min(u);
            hi = hi.max(u);
        }
        if lo > hi {
            // Nothing drawable: an empty frame with a sensible scale.
            (lo, hi) = if log { (-1.0, 0.0) } else { (0.0, 1.0) };
        }
        if log {
            lo = lo.max(hi - MAX_DECADES as f64);
            let pad = (0.04 * (hi - lo)).max(0.05);
            let (mut a, mut b) = (lo - pad, hi + pad);
            // Fewer than two labelled decades reads badly: widen to whole decades.
            if b.floor() - a.ceil() < 1.0 {
                a = a.floor();
                b = b.ceil();
                if b - a < 1.0 {
                    b = a + 1.0;
                }
            }
            return Ok(YAxis { log, lo: a, hi: b });
        }
        let span = hi - lo;
        let pad = if span > 0.0 {
            0.05 * span
        } else {
            // A flat series: centre it in a band ±10 % of its value (±1 around zero).
            if lo == 0.0 {
                1.0
            } else {
                0.1 * lo.abs()
            }
        };
        let (mut a, mut b) = ((lo - pad).max(-f64::MAX), (hi + pad).min(f64::MAX));
        if !(b - a).is_finite() {
            // Padding pushed the span past f64::MAX: drop it (the curve may touch the frame).
            (a, b) = (lo, hi);
        }
        if !(b - a).is_finite() || b - a <= 0.0 {
            return Err(JelloError::Invalid(format!(
                "plot: y range {lo:e}..{hi:e} is too wide for a linear axis (use log_y)"
            )));
        }
        Ok(YAxis { log, lo: a, hi: b })
    }

    /// Labelled (major) ticks and minor grid positions, in axis coordinates.
    fn ticks(&self) -> (Vec<f64>, Vec<f64>) {
        if self.log {
            let (first, last) = (self.lo.ceil() as i64, self.hi.floor() as i64);
            let count = (last - first + 1).max(1);
            let stride = (count as f64 / 8.0).ceil().max(1.0) as i64;
            let major: Vec<f64> = (first..=last)
                .filter(|k| (k - first) % stride == 0)
                .map(|k| k as f64)
                .collect();
            // Minor lines at 2..9 × 10^k only while each decade is labelled and few enough
            // that they read as a scale rather than a grey wash.
            let mut minor = Vec::new();
            if stride == 1 && count <= 10 {
                for k in (first - 1)..=last {
                    for m in 2..=9 {
                        let u = k as f64 + (m as f64).log10();
                        if u > self.lo && u < self.hi {
                            minor.push(u);
                        }
                    }
                }
            }
            (major, minor)
        } else {
            let step = nice_step((self.hi - self.lo) / 6.0);
            let first = (self.lo / step).ceil();
            let major = (0..)
                .map(|i| (first + i as f64) * step)
                .take_while(|&v| v <= self.hi)
                .take(64)
                .collect();
            (major, Vec::new())
        }
    }

    fn label(&self, u: f64) -> String {
        if self.log {
            format!("10{}", superscript(u.round() as i64))
        } else {
            format_linear(u, self.hi.abs().max(self.lo.abs()))
        }
    }
}

/// 1, 2 or 5 × 10^k, the smallest at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&s| s >= raw * (1.0 - 1e-12))
        .unwrap_or(10.0 * mag)
}

/// A linear tick label: plain for moderate magnitudes, scientific outside 1e-3..1e5.
fn format_linear(v: f64, magnitude: f64) -> String {
    if v.abs() < magnitude * 1e-12 {
        return "0".into();
    }
    if !(1e-3..1e5).contains(&magnitude) {
        return format!("{v:.2e}");
    }
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// `k` in Unicode superscript digits (DejaVu Sans has all of them).
fn superscript(k: i64) -> String {
    const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut s = String::new();
    if k < 0 {
        s.push('⁻');
    }
    for c in k.unsigned_abs().to_string().chars() {
        s.push(DIGITS[c as usize - '0' as usize]);
    }
    s
}

/// Integer ticks 0, s, 2s, ... with s from 1, 2, 5 × 10^k, about eight of them.
fn x_ticks(x_max: f64) -> Vec<f64> {
    let step = nice_step(x_max / 8.0).max(1.0);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|&v| v <= x_max)
        .take(64)
        .collect()
}

/// A linear plotters axis with the tick positions chosen here rather than by plotters: decade
/// ticks on a log axis (whose coordinate is log₁₀ y), integer iterations on the x axis.
/// (plotters' `WithKeyPoints` does the same but cannot take a label formatter.)
#[derive(Clone)]
struct Ticked {
    lo: f64,
    hi: f64,
    /// Labelled positions, with grid lines.
    major: Vec<f64>,
    /// Light grid lines only.
    minor: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        // Computed as a fraction of the range so a range near ±f64::MAX does not overflow.
        let t = (v - self.lo) / (self.hi - self.lo);
        let size = (limit.1 - limit.0) as f64;
        let p = limit.0 as f64 + t * size;
        // Off-range values land far outside, never wrap; NaN is never passed.
        p.round().clamp(-1e7, 1e7) as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.major.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

fn rgb(c: [u8; 3]) -> RGBColor {
    RGBColor(c[0], c[1], c[2])
}

/// Renders the plot into an RGB buffer (see [`PlotImage::to_png`]). Errors if the image size is
/// out of range, or (on a linear axis) the y range overflows `f64`.
pub fn render_image(spec: &PlotSpec, series: &[Series]) -> Result<PlotImage> {
    let (w, h) = (spec.width, spec.height);
    if !(MIN_WIDTH..=MAX_SIDE).contains(&w) || !(MIN_HEIGHT..=MAX_SIDE).contains(&h) {
        return Err(JelloError::Invalid(format!(
            "plot: size {w}×{h} outside {MIN_WIDTH}..={MAX_SIDE} × {MIN_HEIGHT}..={MAX_SIDE}"
        )));
    }
    let font = text::font()?;
    // Samples past the last category are not drawn, so they do not widen the y range either.
    let drawn = if spec.x_categories.is_empty() {
        usize::MAX
    } else {
        spec.x_categories.len()
    };
    let y_axis = YAxis::fit(
        spec.log_y,
        series
            .iter()
            .flat_map(|s| s.y.iter().take(drawn).copied())
            .chain(spec.hlines.iter().map(|l| l.0)),
    )?;
    let hlines: Vec<(f64, &str)> = spec
        .hlines
        .iter()
        .filter_map(|&(y, label)| y_axis.map(y).map(|u| (u, label)))
        .filter(|(u, _)| *u > y_axis.lo && *u < y_axis.hi)
        .collect();
    let categorical = !spec.x_categories.is_empty();
    let n_max = if categorical {
        spec.x_categories.len()
    } else {
        series.iter().map(|s| s.y.len()).max().unwrap_or(0)
    };
    let x_max = if categorical {
        n_max.saturating_sub(1) as f64
    } else {
        (n_max.saturating_sub(1) as f64).max(1.0)
    };
    // Categories keep half a slot of room at each end so the outer labels fit.
    let x_pad = if categorical { 0.5 } else { 0.02 * x_max };

    // Everything scales with the image so thumbnails and posters keep their proportions;
    // 800×500 gives 20 px titles, 15 px axis labels and 13 px tick labels.
    let scale = (w as f64 / 800.0).min(h as f64 / 500.0).clamp(0.55, 4.0);
    let px = |v: f64| (v * scale).round().max(1.0) as i32;
    let (title_pt, label_pt, tick_pt) = (px(20.0) as f32, px(15.0) as f32, px(13.0) as f32);
    let text_w = |s: &str, size: f32| text::width(font, size, s).ceil() as i32;
    let line_h = |size: f32| text::height(font, size).ceil() as i32;
    let line_w = px(2.0) as u32;
    let mut labels: Vec<Label> = Vec::new();
    let mut label = |text: &str, size: f32, at: (i32, i32), align: (Align, Align), upright| {
        labels.push(Label {
            text: text.to_string(),
            size,
            at,
            align,
            color: INK_RGB,
            upright,
        });
    };

    // Legend column right of the frame, at most 30 % of the width.
    let legend_w = if series.is_empty() {
        0
    } else {
        let widest = series
            .iter()
            .map(|s| text_w(&s.name, label_pt))
            .max()
            .unwrap_or(0);
        (widest + px(62.0)).min((0.3 * w as f64) as i32)
    };
    let top = if spec.title.is_empty() {
        px(10.0)
    } else {
        label(
            spec.title,
            title_pt,
            (w as i32 / 2, px(8.0)),
            (Align::Centre, Align::Start),
            false,
        );
        px(8.0) + line_h(title_pt) + px(6.0)
    };

    let (y_major, y_minor) = y_axis.ticks();
    let widest_tick = y_major
        .iter()
        .map(|&u| text_w(&y_axis.label(u), tick_pt))
        .max()
        .unwrap_or(0);
    let tick_len = px(5.0);
    let y_desc_w = if spec.y_label.is_empty() {
        0
    } else {
        line_h(label_pt) + px(8.0)
    };
    let x_desc_h = if spec.x_label.is_empty() {
        0
    } else {
        line_h(label_pt) + px(6.0)
    };
    let x_major = if categorical {
        (0..n_max).map(|i| i as f64).collect()
    } else {
        x_ticks(x_max)
    };
    let (x_lo, x_hi) = (-x_pad, x_max + x_pad);

    let mut buf = vec![255u8; 3 * w as usize * h as usize];
    let area = {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        let body = root.margin(top, 0, 0, 0);
        let (chart_area, legend_area) = body.split_horizontally(w as i32 - legend_w);
        let margin = px(8.0);
        let mut chart = ChartBuilder::on(&chart_area)
            .margin(margin)
            .margin_top(px(4.0))
            .x_label_area_size(tick_len + px(4.0) + line_h(tick_pt) + x_desc_h)
            .y_label_area_size(tick_len + px(4.0) + widest_tick + y_desc_w)
            .build_cartesian_2d(
                Ticked {
                    lo: x_lo,
                    hi: x_hi,
                    major: x_major.clone(),
                    minor: Vec::new(),
                },
                Ticked {
                    lo: y_axis.lo,
                    hi: y_axis.hi,
                    major: y_major.clone(),
                    minor: y_minor,
                },
            )
            .map_err(draw_err)?;
        // Grid lines from plotters. Its axes are off: they would draw their labels through
        // plotters' text path (see `text`); ticks and labels are drawn here instead.
        chart
            .configure_mesh()
            .x_labels(x_major.len() + 1)
            .y_labels(y_major.len() + 1)
            .disable_x_axis()
            .disable_y_axis()
            .bold_line_style(GRID.stroke_width(1))
            .light_line_style(GRID_MINOR.stroke_width(1))
            .draw()
            .map_err(draw_err)?;

        let (xs, ys) = chart.plotting_area().get_pixel_range();
        let area = PlotArea {
            left: xs.start.max(0) as u32,
            top: ys.start.max(0) as u32,
            right: (xs.end - 1).max(0) as u32,
            bottom: (ys.end - 1).max(0) as u32,
        };
        let (al, at, ar, ab) = (
            area.left as i32,
            area.top as i32,
            area.right as i32,
            area.bottom as i32,
        );
        let tick = |a: (i32, i32), b: (i32, i32)| {
            root.draw(&PathElement::new(vec![a, b], FRAME.stroke_width(1)))
                .map_err(draw_err)
        };
        for &x in &x_major {
            let (cx, _) = chart.backend_coord(&(x, y_axis.lo));
            tick((cx, ab), (cx, ab + tick_len))?;
            let text = if categorical {
                spec.x_categories[x.round() as usize].to_string()
            } else {
                format!("{}", x.round() as i64)
            };
            let at_ = (cx, ab + tick_len + px(3.0));
            label(&text, tick_pt, at_, (Align::Centre, Align::Start), false);
        }
        for &u in &y_major {
            let (_, cy) = chart.backend_coord(&(x_lo, u));
            tick((al - tick_len, cy), (al, cy))?;
            let at_ = (al - tick_len - px(4.0), cy);
            label(
                &y_axis.label(u),
                tick_pt,
                at_,
                (Align::End, Align::Centre),
                false,
            );
        }
        if !spec.x_label.is_empty() {
            let at_ = (
                (al + ar) / 2,
                ab + tick_len + px(4.0) + line_h(tick_pt) + px(4.0),
            );
            label(
                spec.x_label,
                label_pt,
                at_,
                (Align::Centre, Align::Start),
                false,
            );
        }
        if !spec.y_label.is_empty() {
            let (cx, _) = chart_area.get_pixel_range();
            let at_ = (cx.start + margin, (at + ab) / 2);
            label(
                spec.y_label,
                label_pt,
                at_,
                (Align::Start, Align::Centre),
                true,
            );
        }

        // Reference lines: dashed, labelled at the right end just above the line.
        for &(u, text) in &hlines {
            // 6-pixel dashes with 4-pixel gaps at any image size.
            let dash = (x_hi - x_lo) * px(6.0) as f64 / (ar - al).max(1) as f64;
            let mut x = x_lo;
            let mut dashes = Vec::new();
            while x < x_hi {
                dashes.push(PathElement::new(
                    vec![(x, u), ((x + dash).min(x_hi), u)],
                    REFERENCE.stroke_width(1),
                ));
                x += dash * 10.0 / 6.0;
            }
            chart.draw_series(dashes).map_err(draw_err)?;
            let (lx, ly) = chart.backend_coord(&(x_hi, u));
            labels.push(Label {
                text: text.to_string(),
                size: px(12.0) as f32,
                at: (lx - px(6.0), ly - px(3.0)),
                align: (Align::End, Align::End),
                color: REFERENCE_RGB,
                upright: false,
            });
        }

        // Curves, in order, so series 0 ends up underneath where they overlap.
        let floor = y_axis.lo;
        for (i, s) in series.iter().enumerate() {
            let color = rgb(series_color(i));
            let pts: Vec<Option<(f64, f64)>> =
                s.y.iter()
                    .take(drawn)
                    .enumerate()
                    .map(|(k, &y)| y_axis.map(y).map(|u| (k as f64, u)))
                    .collect();
            for run in polylines(&pts, floor) {
                if run.len() >= 2 {
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            run,
                            color.stroke_width(line_w),
                        )))
                        .map_err(draw_err)?;
                }
            }
            // Markers on short series and on isolated points, which have no line.
            let short = s.y.len() <= MARKERS_UP_TO;
            let markers = pts.iter().enumerate().filter_map(|(k, p)| {
                let p = (*p)?;
                let isolated =
                    (k == 0 || pts[k - 1].is_none()) && pts.get(k + 1).is_none_or(|q| q.is_none());
                (p.1 >= floor && (short || isolated)).then_some(p)
            });
            chart
                .draw_series(markers.map(|p| Circle::new(p, px(3.0), color.filled())))
                .map_err(draw_err)?;
        }

        // The frame, drawn last so nothing covers it.
        root.draw(&Rectangle::new([(al, at), (ar, ab)], FRAME.stroke_width(1)))
            .map_err(draw_err)?;

        if legend_w > 0 {
            let (cx, _) = legend_area.get_pixel_range();
            let legend = Legend {
                x0: cx.start + px(4.0),
                x1: cx.end - px(8.0),
                top: at,
                bottom: ab,
                size: label_pt,
                line_w,
                px: &px,
                width: &|s: &str| text_w(s, label_pt),
            };
            legend.draw(&root, series, &mut labels)?;
        }
        root.present().map_err(draw_err)?;
        area
    };
    for l in &labels {
        text::draw(&mut buf, w, h, font, l);
    }
    Ok(PlotImage {
        width: w,
        height: h,
        rgb: buf,
        area,
    })
}

/// Splits a series into the polylines to draw: runs of drawable points, with segments that
/// cross below `floor` (the bottom of a clamped log axis) cut where they cross it.
fn polylines(pts: &[Option<(f64, f64)>], floor: f64) -> Vec<Vec<(f64, f64)>> {
    let mut runs = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    let mut flush = |cur: &mut Vec<(f64, f64)>| {
        if !cur.is_empty() {
            runs.push(std::mem::take(cur));
        }
    };
    for k in 0..pts.len() {
        let Some(p) = pts[k] else {
            flush(&mut cur);
            continue;
        };
        let prev = if k > 0 { pts[k - 1] } else { None };
        match (prev, p.1 >= floor) {
            (Some(a), true) if a.1 < floor => {
                // Coming back up through the floor: start at the crossing.
                let t = (floor - a.1) / (p.1 - a.1);
                cur.push((a.0 + t * (p.0 - a.0), floor));
                cur.push(p);
            }
            (_, true) => cur.push(p),
            (Some(a), false) if a.1 >= floor => {
                let t = (a.1 - floor) / (a.1 - p.1);
                cur.push((a.0 + t * (p.0 - a.0), floor));
                flush(&mut cur);
            }
            (_, false) => flush(&mut cur),
        }
    }
    flush(&mut cur);
    runs
}

/// `s`, shortened with `…` until it fits in `max_w` pixels.
fn fit_text(s: &str, max_w: i32, width: &dyn Fn(&str) -> i32) -> String {
    if width(s) <= max_w {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    for n in (0..chars.len()).rev() {
        let t: String = chars[..n].iter().chain(std::iter::once(&'…')).collect();
        if width(&t) <= max_w {
            return t;
        }
    }
    String::new()
}

/// The legend: a framed box at the top of the column right of the plot, one row per series (a
/// line swatch in its colour, then its name, shortened with `…` to fit); rows that do not fit
/// become "+N more".
struct Legend<'a> {
    x0: i32,
    x1: i32,
    top: i32,
    bottom: i32,
    size: f32,
    line_w: u32,
    px: &'a dyn Fn(f64) -> i32,
    width: &'a dyn Fn(&str) -> i32,
}

impl Legend<'_> {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        series: &[Series],
        labels: &mut Vec<Label>,
    ) -> Result<()> {
        let px = self.px;
        let (x0, x1, top) = (self.x0, self.x1, self.top);
        if x1 - x0 < px(30.0) {
            return Ok(());
        }
        let row_h = px(22.0);
        let avail = (self.bottom - top - px(8.0)).max(row_h);
        let fits = (avail / row_h).max(1) as usize;
        let rows = if series.len() <= fits {
            series.len()
        } else {
            fits.saturating_sub(1)
        };
        let overflow = series.len() - rows;
        let n_rows = rows + usize::from(overflow > 0);
        let bottom = top + px(8.0) + n_rows as i32 * row_h;
        root.draw(&Rectangle::new(
            [(x0, top), (x1, bottom)],
            LEGEND_BORDER.stroke_width(1),
        ))
        .map_err(draw_err)?;
        let sw0 = x0 + px(8.0);
        let sw1 = sw0 + px(24.0);
        let text_x = sw1 + px(8.0);
        let max_text = x1 - px(6.0) - text_x;
        let mut push = |text: String, x: i32, cy: i32| {
            labels.push(Label {
                text,
                size: self.size,
                at: (x, cy),
                align: (Align::Start, Align::Centre),
                color: INK_RGB,
                upright: false,
            })
        };
        for (i, s) in series.iter().take(rows).enumerate() {
            let cy = top + px(4.0) + i as i32 * row_h + row_h / 2;
            let c = rgb(series_color(i));
            root.draw(&PathElement::new(
                vec![(sw0, cy), (sw1, cy)],
                c.stroke_width(self.line_w),
            ))
            .map_err(draw_err)?;
            root.draw(&Circle::new(((sw0 + sw1) / 2, cy), px(3.0), c.filled()))
                .map_err(draw_err)?;
            push(fit_text(&s.name, max_text, self.width), text_x, cy);
        }
        if overflow > 0 {
            let cy = top + px(4.0) + rows as i32 * row_h + row_h / 2;
            push(format!("+{overflow} more"), sw0, cy);
        }
        Ok(())
    }
}
