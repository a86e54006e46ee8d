//! The colour bar drawn beside a body painted with a scalar field, labelled with its end values
//! (the `pictures` feature: its text needs the embedded font).

use super::colormap::{viridis, LogScale};
use super::image::RgbaImage;
use super::text::{self, Align, Label};

/// Draws a vertical colour bar on `image` near its right edge with the scale's maximum above
/// it and minimum below it (e.g. `1.23e-4 N`, `unit` appended), and `title` above all.
/// Colours are 8-bit sRGB, written straight into the pixels; the labels are antialiased
/// DejaVu Sans, the plots' font (`super::text`), 12 px below 400 px of image
/// height and 20 px above, so they stay legible on thumbnails and full-size frames.
pub fn draw_colour_bar(image: &mut RgbaImage, scale: &LogScale, unit: &str, title: &str) {
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
