//! A perceptual colour map for scalar fields painted on a surface (the residual picture), a
//! log-scale mapping of values to it, and the colour bar drawn beside the body with its end
//! values.

use super::image::RgbaImage;

/// Viridis (van der Walt and Smith, matplotlib's default map) sampled at t = 0, 0.1, …, 1, sRGB
/// 8-bit. Perceptually uniform, readable in greyscale and by colour-blind viewers; its
/// lightness rises monotonically from dark purple (low) to yellow (high).
const VIRIDIS: [[u8; 3]; 11] = [
    [68, 1, 84],
    [72, 36, 117],
    [65, 68, 135],
    [53, 95, 141],
    [42, 120, 142],
    [33, 145, 140],
    [34, 168, 132],
    [68, 191, 112],
    [122, 209, 81],
    [189, 223, 38],
    [253, 231, 37],
];

/// The colour for vertices that carry no value (pinned vertices in the residual picture): a
/// neutral grey, sRGB.
pub const NO_VALUE_COLOUR: [f32; 3] = [0.62, 0.62, 0.62];

/// Viridis at `t` ∈ [0, 1] (clamped; NaN maps to 0), sRGB in [0, 1]: piecewise linear between
/// the samples.
pub fn viridis(t: f32) -> [f32; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (VIRIDIS.len() - 1) as f32;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f32;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    std::array::from_fn(|k| ((1.0 - f) * a[k] as f32 + f * b[k] as f32) / 255.0)
}

/// A log₁₀ scale from the smallest to the largest positive value of a field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogScale {
    /// The value painted at the bottom of the map (the smallest positive value), in the
    /// field's unit.
    pub min: f64,
    /// The value painted at the top (the largest value).
    pub max: f64,
}

impl LogScale {
    /// The scale spanning the positive, finite values of `values` (others are skipped), or
    /// `None` when there is none.
    pub fn spanning<'a>(values: impl IntoIterator<Item = &'a f64>) -> Option<LogScale> {
        let (mut min, mut max) = (f64::INFINITY, 0.0f64);
        for &v in values {
            if v.is_finite() && v > 0.0 {
                min = min.min(v);
                max = max.max(v);
            }
        }
        (max > 0.0).then_some(LogScale { min, max })
    }

    /// Where `v` falls on the map, in [0, 1]: log-linear between `min` and `max` (0.5 when they
    /// are equal); `None` for a value that is not positive and finite.
    pub fn position(&self, v: f64) -> Option<f32> {
        if !(v.is_finite() && v > 0.0) {
            return None;
        }
        let span = (self.max / self.min).log10();
        if span <= 0.0 {
            return Some(0.5);
        }
        Some(((v / self.min).log10() / span).clamp(0.0, 1.0) as f32)
    }

    /// The sRGB colour of `v`: viridis at [`Self::position`], [`NO_VALUE_COLOUR`] for a value
    /// that is not positive and finite.
    pub fn colour(&self, v: f64) -> [f32; 3] {
        self.position(v).map_or(NO_VALUE_COLOUR, viridis)
    }
}

/// Draws a vertical colour bar on `image` near its right edge with the scale's maximum above
/// it and minimum below it (e.g. `1.23e-4 N`, `unit` appended), and `title` above all.
/// Colours are 8-bit sRGB, written straight into the pixels; the labels are antialiased
/// DejaVu Sans, the plots' font (`crate::output::plot::text`), 12 px below 400 px of image
/// height and 20 px above, so they stay legible on thumbnails and full-size frames.
pub fn draw_colour_bar(image: &mut RgbaImage, scale: &LogScale, unit: &str, title: &str) {
    use crate::output::plot::text::{self, Align, Label};
    let (w, h) = (image.width as i64, image.height as i64);
    let size: f32 = if h >= 400 { 20.0 } else { 12.0 };
    // The font is embedded and parsed once; if it ever failed to parse, the bar is still
    // drawn, without labels (a picture is worth more than an error here).
    let font = text::font().ok();
    let line = font.map_or(size, |f| text::height(f, size)).ceil() as i64 + 2;
    let top_label = format!("{:.2e} {unit}", scale.max);
    let bottom_label = format!("{:.2e} {unit}", scale.min);
    let label_w = [top_label.as_str(), bottom_label.as_str(), title]
        .iter()
        .map(|s| font.map_or(0.0, |f| text::width(f, size, s)).ceil() as i64)
        .max()
        .unwrap_or(0);
    let bar_w = (size * 0.6).round() as i64;
    let margin = (size * 0.6).round() as i64;
    let x_bar = (w - margin - label_w.max(bar_w) / 2 - bar_w / 2).max(0);
    let y0 = (margin + 2 * line).min(h - 1);
    let y1 = (h - margin - line).max(y0 + 1);
    let ink = [30u8, 30, 30];
    let mut put = |x: i64, y: i64, c: [u8; 3]| {
        if x >= 0 && y >= 0 && x < w && y < h {
            let i = 4 * (y as usize * w as usize + x as usize);
            image.pixels[i..i + 3].copy_from_slice(&c);
            image.pixels[i + 3] = 255;
        }
    };
    for y in y0..=y1 {
        // Top is the maximum.
        let t = 1.0 - (y - y0) as f32 / (y1 - y0) as f32;
        let c = viridis(t).map(|v| (v * 255.0).round() as u8);
        for x in x_bar..x_bar + bar_w {
            put(x, y, c);
        }
        put(x_bar - 1, y, ink);
        put(x_bar + bar_w, y, ink);
    }
    for x in x_bar - 1..=x_bar + bar_w {
        put(x, y0 - 1, ink);
        put(x, y1 + 1, ink);
    }
    let Some(font) = font else {
        return;
    };
    // Centred on the bar, but kept inside the image when the label is wider than the margin.
    let centre = x_bar + bar_w / 2;
    let at_x = |s: &str| {
        let half = text::width(font, size, s).ceil() as i64 / 2;
        centre.clamp(half, (w - half).max(half))
    };
    for (s, y) in [
        (title, y0 - 2 * line),
        (top_label.as_str(), y0 - line),
        (bottom_label.as_str(), y1 + 3),
    ] {
        let label = Label {
            text: s.to_string(),
            size,
            at: (at_x(s) as i32, y as i32),
            align: (Align::Centre, Align::Start),
            color: ink,
            upright: false,
        };
        text::draw_rgba(&mut image.pixels, image.width, image.height, font, &label);
    }
}
