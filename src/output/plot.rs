//! Line plots as PNG (e.g. residual versus iteration, one curve per solver) without a plotting
//! dependency: a small rasteriser, a built-in 5×7 bitmap font, a linear or log₁₀ y axis, a
//! legend, and optional horizontal reference lines (a tolerance, say).
//!
//! The x axis is the sample index (0, 1, 2, ...). Points that cannot be drawn (non-finite, or
//! ≤ 0 on a log axis) are skipped and break their curve; a point with no drawable neighbour is
//! drawn as a small square so a one-sample curve still shows.

use super::atomic_write;
use crate::error::{JelloError, Result};
use std::path::Path;

/// One curve: `y[i]` is plotted at `x = i`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Legend text (ASCII; other characters are drawn as `?`).
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
    /// Text under the x axis; empty for none.
    pub x_label: &'a str,
    /// Text beside the y axis (drawn rotated); empty for none.
    pub y_label: &'a str,
    /// Log₁₀ y axis with decade ticks (clamped to [`MAX_DECADES`] below the largest value).
    pub log_y: bool,
    /// Image width in pixels, [`MIN_WIDTH`]..=[`MAX_SIDE`].
    pub width: u32,
    /// Image height in pixels, [`MIN_HEIGHT`]..=[`MAX_SIDE`].
    pub height: u32,
    /// Horizontal reference lines `(y, label)`, drawn dashed; they count towards the y range.
    pub hlines: &'a [(f64, &'a str)],
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

/// Series colours, in order; series `i` gets `PALETTE[i % PALETTE.len()]`.
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
/// labels outside.
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

/// Renders the plot and writes it to `path` as PNG, atomically.
pub fn write_plot(path: &Path, spec: &PlotSpec, series: &[Series]) -> Result<()> {
    atomic_write(path, &render_plot(spec, series)?)
}

const WHITE: [u8; 3] = [255, 255, 255];
const INK: [u8; 3] = [30, 30, 30];
const FRAME: [u8; 3] = [60, 60, 60];
const GRID: [u8; 3] = [228, 228, 228];
const GRID_MINOR: [u8; 3] = [243, 243, 243];
const REFERENCE: [u8; 3] = [90, 90, 90];
const LEGEND_BORDER: [u8; 3] = [190, 190, 190];

/// Renders the plot into an RGB buffer (see [`PlotImage::to_png`]). Errors if the image size is
/// out of range or too small to hold the axes and labels.
pub fn render_image(spec: &PlotSpec, series: &[Series]) -> Result<PlotImage> {
    let (w, h) = (spec.width, spec.height);
    if !(MIN_WIDTH..=MAX_SIDE).contains(&w) || !(MIN_HEIGHT..=MAX_SIDE).contains(&h) {
        return Err(JelloError::Invalid(format!(
            "plot: size {w}×{h} outside {MIN_WIDTH}..={MAX_SIDE} × {MIN_HEIGHT}..={MAX_SIDE}"
        )));
    }
    let ts: u32 = if w >= 640 && h >= 400 { 2 } else { 1 };
    let ch = 7 * ts; // glyph height
    let pad = 6 * ts;
    let gap = 3 * ts;
    let tick = 3 * ts + 1;
    let inset = 4 * ts; // data never touches the frame

    // Vertical layout does not depend on the horizontal one.
    let top = if spec.title.is_empty() {
        pad + ch / 2
    } else {
        pad + ch + pad
    };
    let mut bottom_margin = tick + gap + ch + pad;
    if !spec.x_label.is_empty() {
        bottom_margin += 2 * gap + ch;
    }
    let too_small = || {
        JelloError::Invalid(format!(
            "plot: {w}×{h} is too small for the axes, labels and legend"
        ))
    };
    let bottom = h
        .checked_sub(bottom_margin + 1)
        .filter(|&b| b >= top + 2 * inset + 16)
        .ok_or_else(too_small)?;
    let plot_h = (bottom - top) as f64;

    let axis_h = plot_h - 2.0 * inset as f64;
    let scale = YScale::fit(spec, series, axis_h, ch as f64);
    let y_ticks = scale.ticks(axis_h, ch as f64);
    let max_y_label = y_ticks
        .iter()
        .filter_map(|t| t.label.as_deref())
        .map(|s| text_width(s, ts))
        .max()
        .unwrap_or(0);
    let mut left = pad + max_y_label + gap + tick;
    if !spec.y_label.is_empty() {
        left += ch + 2 * gap;
    }

    // Legend column on the right, names truncated to keep it within a third of the width.
    let swatch = 10 * ts + 6;
    let max_chars = ((w / 3).saturating_sub(2 * pad + swatch + gap) / (6 * ts)) as usize;
    let names: Vec<String> = series.iter().map(|s| fit(&s.name, max_chars)).collect();
    let legend_w = names
        .iter()
        .map(|n| text_width(n, ts))
        .max()
        .map(|tw| pad + swatch + gap + tw + pad);
    let n_points = series.iter().map(|s| s.y.len()).max().unwrap_or(0);
    let x_hi = n_points.saturating_sub(1).max(1) as f64;
    let x_label_w = text_width(&format_count(x_hi), ts);
    let right_margin = match legend_w {
        Some(lw) => 2 * gap + lw + pad,
        None => pad + x_label_w / 2,
    };
    let right = w
        .checked_sub(right_margin + 1)
        .filter(|&r| r >= left + 2 * inset + 16)
        .ok_or_else(too_small)?;
    let plot_w = (right - left) as f64;
    let area = PlotArea {
        left,
        top,
        right,
        bottom,
    };

    let map = Mapping {
        x0: (left + inset) as f64,
        x_scale: (plot_w - 2.0 * inset as f64) / x_hi,
        y0: (bottom - inset) as f64,
        y_scale: (plot_h - 2.0 * inset as f64) / (scale.hi() - scale.lo()),
        t_lo: scale.lo(),
    };
    let mut c = Canvas::new(w, h);

    // Grid.
    let inner = |y: f64| y > top as f64 && y < bottom as f64;
    for t in &y_ticks {
        let y = map.y(t.at).round();
        if inner(y) {
            let color = if t.label.is_some() { GRID } else { GRID_MINOR };
            c.hline(left as i64 + 1, right as i64 - 1, y as i64, color);
        }
    }
    let x_step =
        nice_step(x_hi / ((plot_w / (x_label_w + 4 * 6 * ts) as f64).clamp(1.0, 10.0))).max(1.0);
    let x_ticks: Vec<f64> = (0..)
        .map(|k| k as f64 * x_step)
        .take_while(|&x| x <= x_hi * (1.0 + 1e-9))
        .take(1000)
        .collect();
    for &x in &x_ticks {
        let px = map.x(x).round() as i64;
        c.vline(px, top as i64 + 1, bottom as i64 - 1, GRID);
    }

    // Reference lines and their labels, under the curves.
    for &(v, label) in spec.hlines {
        let Some(t) = scale.transform(v) else {
            continue;
        };
        let py = map.y(t).round();
        if !inner(py) {
            continue;
        }
        let py = py as i64;
        let mut x = left as i64 + 1;
        while x < right as i64 {
            let end = (x + 7).min(right as i64 - 1);
            c.fill_rect(x, py, end - x + 1, 2, REFERENCE);
            x += 12;
        }
        if !label.is_empty() {
            let label = fit(label, ((plot_w as u32 / 2) / (6 * ts)) as usize);
            let tx = right as i64 - inset as i64 - text_width(&label, ts) as i64;
            let above = py - gap as i64 - ch as i64;
            let ty = if above > top as i64 + 2 {
                above
            } else {
                py + 2 + gap as i64
            };
            c.text(tx, ty, &label, ts, REFERENCE);
        }
    }

    // Curves, clipped just inside the frame (the 2×2 brush reaches one pixel right and down).
    let clip = (
        left as f64 + 1.0,
        top as f64 + 1.0,
        right as f64 - 2.0,
        bottom as f64 - 2.0,
    );
    for (i, s) in series.iter().enumerate() {
        let color = series_color(i);
        let pts: Vec<Option<(f64, f64)>> =
            s.y.iter()
                .enumerate()
                .map(|(k, &v)| scale.transform(v).map(|t| (map.x(k as f64), map.y(t))))
                .collect();
        for k in 0..pts.len() {
            let Some(p) = pts[k] else { continue };
            let prev = k > 0 && pts[k - 1].is_some();
            match pts.get(k + 1).copied().flatten() {
                Some(q) => {
                    if let Some((a, b)) = clip_segment(p, q, clip) {
                        c.line(a, b, color);
                    }
                }
                None if !prev => {
                    let (x, y) = (p.0.round(), p.1.round());
                    if x >= clip.0 && x <= clip.2 && y >= clip.1 && y <= clip.3 {
                        c.fill_rect(x as i64 - 1, y as i64 - 1, 4, 4, color);
                    }
                }
                None => {}
            }
        }
    }

    // Frame, ticks and tick labels.
    c.hline(left as i64, right as i64, top as i64, FRAME);
    c.hline(left as i64, right as i64, bottom as i64, FRAME);
    c.vline(left as i64, top as i64, bottom as i64, FRAME);
    c.vline(right as i64, top as i64, bottom as i64, FRAME);
    for t in &y_ticks {
        let y = map.y(t.at).round();
        if !(y >= top as f64 && y <= bottom as f64) {
            continue;
        }
        let y = y as i64;
        let len = if t.label.is_some() {
            tick
        } else {
            tick / 2 + 1
        };
        c.hline(left as i64 - len as i64, left as i64 - 1, y, FRAME);
        if let Some(label) = &t.label {
            let tx = (left - tick - gap - text_width(label, ts)) as i64;
            c.text(tx, y - (ch / 2) as i64, label, ts, INK);
        }
    }
    for &x in &x_ticks {
        let px = map.x(x).round() as i64;
        c.vline(px, bottom as i64 + 1, (bottom + tick) as i64, FRAME);
        let label = format_count(x);
        let tx = px - (text_width(&label, ts) / 2) as i64;
        c.text(tx, (bottom + tick + gap) as i64, &label, ts, INK);
    }

    // Title and axis labels.
    if !spec.title.is_empty() {
        let title = fit(spec.title, (w / (6 * ts)) as usize);
        let tw = text_width(&title, ts) as i64 + 1;
        let cx = (left + right) as i64 / 2;
        let tx = (cx - tw / 2).clamp(0, (w as i64 - tw).max(0));
        // Bold: the same text twice, one pixel apart.
        c.text(tx, pad as i64, &title, ts, INK);
        c.text(tx + 1, pad as i64, &title, ts, INK);
    }
    if !spec.x_label.is_empty() {
        let label = fit(spec.x_label, (plot_w as u32 / (6 * ts)) as usize);
        let tx = (left + right) as i64 / 2 - text_width(&label, ts) as i64 / 2;
        let ty = (bottom + tick + gap + ch + 2 * gap) as i64;
        c.text(tx, ty, &label, ts, INK);
    }
    if !spec.y_label.is_empty() {
        let label = fit(spec.y_label, (plot_h as u32 / (6 * ts)) as usize);
        let ty = (top + bottom) as i64 / 2 + text_width(&label, ts) as i64 / 2;
        c.text_up(pad as i64, ty, &label, ts, INK);
    }

    // Legend.
    if let Some(lw) = legend_w {
        let lx = (right + 2 * gap) as i64;
        let row = (ch + 4 * ts) as i64;
        let fits = ((bottom - top) as i64 - 2 * pad as i64) / row;
        let shown = if names.len() as i64 <= fits {
            names.len()
        } else {
            fits.max(1) as usize - 1
        };
        let rows = shown + usize::from(shown < names.len());
        let lh = 2 * pad as i64 + rows as i64 * row - 4 * ts as i64;
        c.rect_outline(lx, top as i64, lw as i64, lh, LEGEND_BORDER);
        for (k, name) in names.iter().take(shown).enumerate() {
            let ty = top as i64 + pad as i64 + k as i64 * row;
            let color = series_color(k);
            c.fill_rect(
                lx + pad as i64,
                ty + ch as i64 / 2 - 1,
                swatch as i64,
                2,
                color,
            );
            let tx = lx + (pad + swatch + gap) as i64;
            c.text(tx, ty, name, ts, INK);
        }
        if shown < names.len() {
            let ty = top as i64 + pad as i64 + shown as i64 * row;
            let more = format!("+{} more", names.len() - shown);
            c.text(lx + pad as i64, ty, &more, ts, INK);
        }
    }

    Ok(PlotImage {
        width: w,
        height: h,
        rgb: c.rgb,
        area,
    })
}

/// Data → pixel mapping (y in transformed units: log₁₀ on a log axis).
struct Mapping {
    x0: f64,
    x_scale: f64,
    y0: f64,
    y_scale: f64,
    t_lo: f64,
}

impl Mapping {
    fn x(&self, x: f64) -> f64 {
        self.x0 + x * self.x_scale
    }
    fn y(&self, t: f64) -> f64 {
        self.y0 - (t - self.t_lo) * self.y_scale
    }
}

/// The y axis range.
enum YScale {
    Linear {
        lo: f64,
        hi: f64,
        step: f64,
    },
    /// Decades `lo..=hi` (exponents of ten).
    Log {
        lo: i32,
        hi: i32,
    },
}

/// One y tick at `at` (transformed units); minor ticks have no label.
struct Tick {
    at: f64,
    label: Option<String>,
}

impl YScale {
    /// A range covering every drawable value and reference line, for an axis `pixels` tall
    /// with labels `text_h` tall; a linear range is rounded outwards to its tick step.
    fn fit(spec: &PlotSpec, series: &[Series], pixels: f64, text_h: f64) -> YScale {
        let values = series
            .iter()
            .flat_map(|s| s.y.iter().copied())
            .chain(spec.hlines.iter().map(|h| h.0))
            .filter(|v| v.is_finite() && (!spec.log_y || *v > 0.0));
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if spec.log_y {
            if lo > hi {
                return YScale::Log { lo: 0, hi: 1 };
            }
            let mut e_hi = hi.log10().ceil() as i32;
            let mut e_lo = lo.log10().floor() as i32;
            if e_hi <= e_lo {
                e_hi = e_lo + 1;
            }
            e_lo = e_lo.max(e_hi - MAX_DECADES);
            YScale::Log { lo: e_lo, hi: e_hi }
        } else {
            if lo > hi {
                (lo, hi) = (0.0, 1.0);
            }
            // Keep the span finite.
            lo = lo.max(-1e300);
            hi = hi.min(1e300);
            if hi - lo <= 1e-9 * lo.abs().max(hi.abs()) {
                let d = if lo == 0.0 { 1.0 } else { 0.5 * lo.abs() };
                (lo, hi) = (lo - d, hi + d);
            }
            let target = (pixels / (3.0 * text_h)).floor().clamp(2.0, 10.0);
            let step = nice_step((hi - lo) / target);
            YScale::Linear {
                lo: (lo / step).floor() * step,
                hi: (hi / step).ceil() * step,
                step,
            }
        }
    }

    fn lo(&self) -> f64 {
        match *self {
            YScale::Linear { lo, .. } => lo,
            YScale::Log { lo, .. } => lo as f64,
        }
    }

    fn hi(&self) -> f64 {
        match *self {
            YScale::Linear { hi, .. } => hi,
            YScale::Log { hi, .. } => hi as f64,
        }
    }

    /// `v` in axis units, or `None` where it cannot be drawn.
    fn transform(&self, v: f64) -> Option<f64> {
        match self {
            YScale::Linear { .. } => v.is_finite().then_some(v),
            YScale::Log { .. } => (v.is_finite() && v > 0.0).then(|| v.log10()),
        }
    }

    /// Ticks for an axis `pixels` tall with labels `text_h` tall.
    fn ticks(&self, pixels: f64, text_h: f64) -> Vec<Tick> {
        let max_labels = (pixels / (2.5 * text_h)).floor().max(2.0);
        match *self {
            YScale::Log { lo, hi } => {
                let decades = hi - lo;
                let every = ((decades as f64 / max_labels).ceil() as i32).max(1);
                let mut ticks = Vec::new();
                for e in lo..=hi {
                    let major = e.rem_euclid(every) == 0;
                    ticks.push(Tick {
                        at: e as f64,
                        label: major.then(|| format!("1e{e}")),
                    });
                    let per_decade = pixels / decades as f64;
                    if every == 1 && e < hi && per_decade >= 4.0 * text_h {
                        for m in 2..10 {
                            ticks.push(Tick {
                                at: e as f64 + (m as f64).log10(),
                                label: None,
                            });
                        }
                    }
                }
                ticks
            }
            YScale::Linear { lo, hi, step } => {
                let magnitude = lo.abs().max(hi.abs());
                let first = (lo / step).round() as i64;
                let last = (hi / step).round() as i64;
                (first..=last)
                    .take(200)
                    .map(|k| {
                        let v = k as f64 * step;
                        Tick {
                            at: v,
                            label: Some(format_linear(v, step, magnitude)),
                        }
                    })
                    .collect()
            }
        }
    }
}

/// The smallest of 1, 2, 5 × 10ᵏ that is ≥ `raw` (1 for nonsense input).
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let base = 10f64.powf(raw.log10().floor());
    let m = raw / base;
    let n = if m <= 1.0 + 1e-9 {
        1.0
    } else if m <= 2.0 + 1e-9 {
        2.0
    } else if m <= 5.0 + 1e-9 {
        5.0
    } else {
        10.0
    };
    n * base
}

/// A tick label on a linear axis with spacing `step` and largest magnitude `magnitude`.
fn format_linear(v: f64, step: f64, magnitude: f64) -> String {
    if v.abs() < 1e-9 * step {
        return "0".to_string();
    }
    let step_exp = step.log10().floor() as i32;
    if magnitude < 1e5 && step >= 1e-3 {
        format!("{:.*}", (-step_exp).max(0) as usize, v)
    } else {
        // The same number of digits on every label of the axis.
        let mag_exp = magnitude.log10().floor() as i32;
        format!("{:.*e}", (mag_exp - step_exp).max(0) as usize, v)
    }
}

/// An x tick label: an integer index.
fn format_count(x: f64) -> String {
    format!("{}", x.round() as i64)
}

/// `s` shortened to at most `max_chars` characters (with a trailing `..` when cut).
fn fit(s: &str, max_chars: usize) -> String {
    let n = s.chars().count();
    if n <= max_chars {
        s.to_string()
    } else if max_chars <= 2 {
        s.chars().take(max_chars).collect()
    } else {
        let mut out: String = s.chars().take(max_chars - 2).collect();
        out.push_str("..");
        out
    }
}

/// Clips segment `p`–`q` to the rectangle `(x0, y0, x1, y1)` (Liang–Barsky).
fn clip_segment(
    p: (f64, f64),
    q: (f64, f64),
    (x0, y0, x1, y1): (f64, f64, f64, f64),
) -> Option<((f64, f64), (f64, f64))> {
    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (pk, qk) in [
        (-dx, p.0 - x0),
        (dx, x1 - p.0),
        (-dy, p.1 - y0),
        (dy, y1 - p.1),
    ] {
        if pk == 0.0 {
            if qk < 0.0 {
                return None;
            }
        } else {
            let r = qk / pk;
            if pk < 0.0 {
                t0 = t0.max(r);
            } else {
                t1 = t1.min(r);
            }
        }
    }
    if t0.is_nan() || t1.is_nan() || t0 > t1 {
        return None;
    }
    Some((
        (p.0 + t0 * dx, p.1 + t0 * dy),
        (p.0 + t1 * dx, p.1 + t1 * dy),
    ))
}

/// An RGB pixel buffer with bounds-checked drawing.
struct Canvas {
    w: u32,
    h: u32,
    rgb: Vec<u8>,
}

impl Canvas {
    fn new(w: u32, h: u32) -> Self {
        Canvas {
            w,
            h,
            rgb: WHITE.repeat(w as usize * h as usize),
        }
    }

    fn put(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if x >= 0 && y >= 0 && x < self.w as i64 && y < self.h as i64 {
            let i = 3 * (y as usize * self.w as usize + x as usize);
            self.rgb[i..i + 3].copy_from_slice(&c);
        }
    }

    fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: [u8; 3]) {
        let (xa, xb) = (x.max(0), (x + w).min(self.w as i64));
        let (ya, yb) = (y.max(0), (y + h).min(self.h as i64));
        for yy in ya..yb {
            for xx in xa..xb {
                self.put(xx, yy, c);
            }
        }
    }

    fn hline(&mut self, x0: i64, x1: i64, y: i64, c: [u8; 3]) {
        self.fill_rect(x0, y, x1 - x0 + 1, 1, c);
    }

    fn vline(&mut self, x: i64, y0: i64, y1: i64, c: [u8; 3]) {
        self.fill_rect(x, y0, 1, y1 - y0 + 1, c);
    }

    fn rect_outline(&mut self, x: i64, y: i64, w: i64, h: i64, c: [u8; 3]) {
        self.hline(x, x + w - 1, y, c);
        self.hline(x, x + w - 1, y + h - 1, c);
        self.vline(x, y, y + h - 1, c);
        self.vline(x + w - 1, y, y + h - 1, c);
    }

    /// A 2-pixel-wide line (Bresenham with a 2×2 brush). Endpoints must already be clipped.
    fn line(&mut self, a: (f64, f64), b: (f64, f64), c: [u8; 3]) {
        let (mut x, mut y) = (a.0.round() as i64, a.1.round() as i64);
        let (x1, y1) = (b.0.round() as i64, b.1.round() as i64);
        let dx = (x1 - x).abs();
        let dy = -(y1 - y).abs();
        let sx = if x < x1 { 1 } else { -1 };
        let sy = if y < y1 { 1 } else { -1 };
        let mut err = dx + dy;
        loop {
            self.fill_rect(x, y, 2, 2, c);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Text with its top-left corner at `(x, y)`, each font pixel `scale`×`scale`.
    fn text(&mut self, x: i64, y: i64, s: &str, scale: u32, c: [u8; 3]) {
        let sc = scale as i64;
        for (k, ch) in s.chars().enumerate() {
            let gx = x + k as i64 * 6 * sc;
            let (bitmap, drop) = glyph(ch);
            for (row, bits) in bitmap.iter().enumerate() {
                let gy = y + (row as i64 + drop) * sc;
                for col in 0..5 {
                    if bits & (0x10 >> col) != 0 {
                        self.fill_rect(gx + col * sc, gy, sc, sc, c);
                    }
                }
            }
        }
    }

    /// Text rotated a quarter turn anticlockwise (reading upwards), starting at the
    /// bottom-left corner `(x, y)`.
    fn text_up(&mut self, x: i64, y: i64, s: &str, scale: u32, c: [u8; 3]) {
        let sc = scale as i64;
        for (k, ch) in s.chars().enumerate() {
            let along = k as i64 * 6 * sc;
            let (bitmap, drop) = glyph(ch);
            for (row, bits) in bitmap.iter().enumerate() {
                for col in 0..5 {
                    if bits & (0x10 >> col) != 0 {
                        let px = x + (row as i64 + drop) * sc;
                        let py = y - along - (col + 1) * sc;
                        self.fill_rect(px, py, sc, sc, c);
                    }
                }
            }
        }
    }
}

/// Draws `s` in the plots' 5×7 font onto an RGBA image with its top-left corner at `(x, y)`,
/// each font pixel `scale`×`scale`, colour `c` (8-bit sRGB); pixels outside are skipped. For
/// labels on rendered frames (the residual picture's colour bar).
pub(crate) fn draw_text(
    image: &mut crate::render::RgbaImage,
    x: i64,
    y: i64,
    s: &str,
    scale: u32,
    c: [u8; 3],
) {
    // Draw black on white into a canvas the size of the text's box, then copy the set pixels.
    let tw = text_width(s, scale) + 1;
    let th = (7 + DESCENDERS as u32) * scale;
    let mut canvas = Canvas::new(tw, th);
    canvas.text(0, 0, s, scale, [0, 0, 0]);
    for yy in 0..canvas.h as i64 {
        for xx in 0..canvas.w as i64 {
            let i = 3 * (yy as usize * canvas.w as usize + xx as usize);
            let (px, py) = (x + xx, y + yy);
            if canvas.rgb[i] == 0
                && px >= 0
                && py >= 0
                && px < image.width as i64
                && py < image.height as i64
            {
                let o = 4 * (py as usize * image.width as usize + px as usize);
                image.pixels[o..o + 3].copy_from_slice(&c);
                image.pixels[o + 3] = 255;
            }
        }
    }
}

/// Width in pixels of `s` drawn at `scale` (5-pixel glyphs, 1-pixel spacing).
pub(crate) fn text_width(s: &str, scale: u32) -> u32 {
    let n = s.chars().count() as u32;
    (6 * n).saturating_sub(1) * scale
}

/// Rows by which the letters with descenders are drawn lower.
const DESCENDERS: i64 = 2;

/// The 5×7 bitmap of `c` and the rows to draw it lower by; characters outside ASCII 32..=126
/// are drawn as `?`.
fn glyph(c: char) -> (&'static [u8; 7], i64) {
    let i = c as u32;
    let i = if (32..=126).contains(&i) {
        i
    } else {
        '?' as u32
    };
    let drop = if matches!(c, 'g' | 'p' | 'q' | 'y') {
        DESCENDERS
    } else {
        0
    };
    (&FONT[(i - 32) as usize], drop)
}

/// 5×7 font for ASCII 32..=126: seven rows top to bottom, bit 4 is the leftmost column.
/// g, p, q and y are drawn [`DESCENDERS`] rows lower so their tails hang below the baseline.
#[rustfmt::skip]
const FONT: [[u8; 7]; 95] = [
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000], // ' '
    [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00000, 0b00100], // !
    [0b01010, 0b01010, 0b01010, 0b00000, 0b00000, 0b00000, 0b00000], // "
    [0b01010, 0b01010, 0b11111, 0b01010, 0b11111, 0b01010, 0b01010], // #
    [0b00100, 0b01111, 0b10100, 0b01110, 0b00101, 0b11110, 0b00100], // $
    [0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011], // %
    [0b01100, 0b10010, 0b10100, 0b01000, 0b10101, 0b10010, 0b01101], // &
    [0b00100, 0b00100, 0b01000, 0b00000, 0b00000, 0b00000, 0b00000], // '
    [0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010], // (
    [0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000], // )
    [0b00000, 0b00100, 0b10101, 0b01110, 0b10101, 0b00100, 0b00000], // *
    [0b00000, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0b00000], // +
    [0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b00100, 0b01000], // ,
    [0b00000, 0b00000, 0b00000, 0b11111, 0b00000, 0b00000, 0b00000], // -
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b01100], // .
    [0b00000, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b00000], // /
    [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110], // 0
    [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110], // 1
    [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111], // 2
    [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110], // 3
    [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010], // 4
    [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110], // 5
    [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110], // 6
    [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000], // 7
    [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110], // 8
    [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100], // 9
    [0b00000, 0b01100, 0b01100, 0b00000, 0b01100, 0b01100, 0b00000], // :
    [0b00000, 0b01100, 0b01100, 0b00000, 0b01100, 0b00100, 0b01000], // ;
    [0b00010, 0b00100, 0b01000, 0b10000, 0b01000, 0b00100, 0b00010], // <
    [0b00000, 0b00000, 0b11111, 0b00000, 0b11111, 0b00000, 0b00000], // =
    [0b01000, 0b00100, 0b00010, 0b00001, 0b00010, 0b00100, 0b01000], // >
    [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b00000, 0b00100], // ?
    [0b01110, 0b10001, 0b00001, 0b01101, 0b10101, 0b10101, 0b01110], // @
    [0b01110, 0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001], // A
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110], // B
    [0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110], // C
    [0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100], // D
    [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111], // E
    [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000], // F
    [0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111], // G
    [0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001], // H
    [0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110], // I
    [0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100], // J
    [0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001], // K
    [0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111], // L
    [0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001], // M
    [0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001], // N
    [0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110], // O
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000], // P
    [0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101], // Q
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001], // R
    [0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110], // S
    [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100], // T
    [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110], // U
    [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100], // V
    [0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010], // W
    [0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001], // X
    [0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100], // Y
    [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111], // Z
    [0b01110, 0b01000, 0b01000, 0b01000, 0b01000, 0b01000, 0b01110], // [
    [0b00000, 0b10000, 0b01000, 0b00100, 0b00010, 0b00001, 0b00000], // \
    [0b01110, 0b00010, 0b00010, 0b00010, 0b00010, 0b00010, 0b01110], // ]
    [0b00100, 0b01010, 0b10001, 0b00000, 0b00000, 0b00000, 0b00000], // ^
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b11111], // _
    [0b01000, 0b00100, 0b00010, 0b00000, 0b00000, 0b00000, 0b00000], // `
    [0b00000, 0b00000, 0b01110, 0b00001, 0b01111, 0b10001, 0b01111], // a
    [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b11110], // b
    [0b00000, 0b00000, 0b01110, 0b10000, 0b10000, 0b10001, 0b01110], // c
    [0b00001, 0b00001, 0b01101, 0b10011, 0b10001, 0b10001, 0b01111], // d
    [0b00000, 0b00000, 0b01110, 0b10001, 0b11111, 0b10000, 0b01110], // e
    [0b00110, 0b01001, 0b01000, 0b11100, 0b01000, 0b01000, 0b01000], // f
    [0b01111, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b01110], // g (drawn 2 rows lower)
    [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001], // h
    [0b00100, 0b00000, 0b01100, 0b00100, 0b00100, 0b00100, 0b01110], // i
    [0b00010, 0b00000, 0b00110, 0b00010, 0b00010, 0b10010, 0b01100], // j
    [0b10000, 0b10000, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010], // k
    [0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110], // l
    [0b00000, 0b00000, 0b11010, 0b10101, 0b10101, 0b10001, 0b10001], // m
    [0b00000, 0b00000, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001], // n
    [0b00000, 0b00000, 0b01110, 0b10001, 0b10001, 0b10001, 0b01110], // o
    [0b11110, 0b10001, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000], // p (drawn 2 rows lower)
    [0b01111, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b00001], // q (drawn 2 rows lower)
    [0b00000, 0b00000, 0b10110, 0b11001, 0b10000, 0b10000, 0b10000], // r
    [0b00000, 0b00000, 0b01111, 0b10000, 0b01110, 0b00001, 0b11110], // s
    [0b01000, 0b01000, 0b11100, 0b01000, 0b01000, 0b01001, 0b00110], // t
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10001, 0b10011, 0b01101], // u
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100], // v
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10101, 0b10101, 0b01010], // w
    [0b00000, 0b00000, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001], // x
    [0b10001, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b01110], // y (drawn 2 rows lower)
    [0b00000, 0b00000, 0b11111, 0b00010, 0b00100, 0b01000, 0b11111], // z
    [0b00010, 0b00100, 0b00100, 0b01000, 0b00100, 0b00100, 0b00010], // {
    [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100], // |
    [0b01000, 0b00100, 0b00100, 0b00010, 0b00100, 0b00100, 0b01000], // }
    [0b00000, 0b00000, 0b01000, 0b10101, 0b00010, 0b00000, 0b00000], // ~
];
