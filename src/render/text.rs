//! Antialiased text in the embedded DejaVu Sans, rasterised by `ab_glyph` straight into an RGB
//! (plots) or RGBA (the colour bar of rendered frames) buffer.
//!
//! Why not plotters' own text: its `ab_glyph` path places each glyph at the pen position and
//! drops the glyph's left side bearing, so letters sit unevenly ("1 e-1 0"); its `ttf` path
//! needs fontconfig and freetype on the machine. Laying glyphs out here (advance, kerning,
//! bearing) costs a few dozen lines and one small crate (ab_glyph, the same one plotters'
//! `ab_glyph` feature would pull).

use crate::error::{JelloError, Result};
use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use std::sync::OnceLock;

/// DejaVu Sans 2.37 (Bitstream Vera licence, `assets/fonts/DejaVuSans-LICENSE.txt`).
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The embedded font, parsed once per process.
pub(crate) fn font() -> Result<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(FONT_BYTES).ok())
        .as_ref()
        .ok_or_else(|| JelloError::Invalid("plot: the embedded font did not parse".into()))
}

/// Where a label's anchor point lies on its box, along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    /// Left or top edge.
    Start,
    /// Middle.
    Centre,
    /// Right or bottom edge.
    End,
}

/// A piece of text to draw once plotters has finished with the buffer.
#[derive(Clone, Debug)]
pub(crate) struct Label {
    pub text: String,
    /// Font size in pixels (ascender to descender).
    pub size: f32,
    /// Anchor point, in image pixels.
    pub at: (i32, i32),
    /// Horizontal and vertical alignment of the (unrotated) text box at the anchor.
    pub align: (Align, Align),
    pub color: [u8; 3],
    /// Rotated a quarter turn anticlockwise (reading upwards), for a y-axis label; the
    /// alignment then applies to the rotated box.
    pub upright: bool,
}

/// Advance width of `s` at `size` pixels, with kerning.
pub(crate) fn width(font: &FontRef<'static>, size: f32, s: &str) -> f32 {
    let f = font.as_scaled(PxScale::from(size));
    let mut w = 0.0;
    let mut prev = None;
    for c in s.chars() {
        let id = f.glyph_id(c);
        if let Some(p) = prev {
            w += f.kern(p, id);
        }
        w += f.h_advance(id);
        prev = Some(id);
    }
    w
}

/// Line height of text at `size` pixels (ascent + descent, no line gap).
pub(crate) fn height(font: &FontRef<'static>, size: f32) -> f32 {
    let f = font.as_scaled(PxScale::from(size));
    f.ascent() - f.descent()
}

/// Coverage of `s` in a box `ceil(width) + 2` × `ceil(height) + 2`, row-major.
fn coverage(font: &FontRef<'static>, size: f32, s: &str) -> (usize, usize, Vec<f32>) {
    let f = font.as_scaled(PxScale::from(size));
    let bw = width(font, size, s).ceil() as usize + 2;
    let bh = height(font, size).ceil() as usize + 2;
    let mut cov = vec![0f32; bw * bh];
    let baseline = 1.0 + f.ascent();
    let mut caret = 1.0;
    let mut prev = None;
    for c in s.chars() {
        let id = f.glyph_id(c);
        if let Some(p) = prev {
            caret += f.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(PxScale::from(size), point(caret, baseline));
        caret += f.h_advance(id);
        let Some(outline) = font.outline_glyph(glyph) else {
            continue; // a space
        };
        let b = outline.px_bounds();
        outline.draw(|gx, gy, c| {
            let (x, y) = (b.min.x as i64 + gx as i64, b.min.y as i64 + gy as i64);
            if x >= 0 && y >= 0 && (x as usize) < bw && (y as usize) < bh {
                let v = &mut cov[y as usize * bw + x as usize];
                *v = (*v + c).min(1.0);
            }
        });
    }
    (bw, bh, cov)
}

/// Draws `label` onto an RGB buffer `w` pixels wide, blending its coverage over what is
/// there; pixels outside the image are skipped.
pub(crate) fn draw(rgb: &mut [u8], w: u32, h: u32, font: &FontRef<'static>, label: &Label) {
    draw_channels(rgb, 3, w, h, font, label);
}

/// Draws `label` onto an RGBA buffer `w` pixels wide (tightly packed, row-major): colour
/// blended as in [`draw`], alpha made opaque wherever the text covers a pixel.
pub(crate) fn draw_rgba(rgba: &mut [u8], w: u32, h: u32, font: &FontRef<'static>, label: &Label) {
    draw_channels(rgba, 4, w, h, font, label);
}

/// The one rasteriser behind [`draw`] and [`draw_rgba`]: `channels` bytes per pixel, the
/// first three RGB, a fourth (alpha) set to 255 where covered.
fn draw_channels(
    buf: &mut [u8],
    channels: usize,
    w: u32,
    h: u32,
    font: &FontRef<'static>,
    label: &Label,
) {
    if label.text.is_empty() {
        return;
    }
    let (bw, bh, cov) = coverage(font, label.size, &label.text);
    // The box as it lands on the image.
    let (dw, dh) = if label.upright { (bh, bw) } else { (bw, bh) };
    let offset = |a: Align, n: usize| match a {
        Align::Start => 0,
        Align::Centre => n as i32 / 2,
        Align::End => n as i32,
    };
    let x0 = label.at.0 - offset(label.align.0, dw);
    let y0 = label.at.1 - offset(label.align.1, dh);
    for v in 0..bh {
        for u in 0..bw {
            let a = cov[v * bw + u];
            if a <= 0.0 {
                continue;
            }
            // Upright: the text's left end at the bottom, its top towards the left.
            let (x, y) = if label.upright {
                (x0 + v as i32, y0 + (bw - 1 - u) as i32)
            } else {
                (x0 + u as i32, y0 + v as i32)
            };
            if x < 0 || y < 0 || x >= w as i32 || y >= h as i32 {
                continue;
            }
            let i = channels * (y as usize * w as usize + x as usize);
            for (k, &c) in label.color.iter().enumerate() {
                let bg = buf[i + k] as f32;
                buf[i + k] = (bg + a * (c as f32 - bg)).round().clamp(0.0, 255.0) as u8;
            }
            if channels == 4 {
                buf[i + 3] = 255;
            }
        }
    }
}
