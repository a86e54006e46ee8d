//! PNG output (the `pictures` feature): an image to a file, and the one-call renders that
//! write one.

use super::camera::Camera;
use super::cpu::{render_rgba_cpu, CpuSurface};
use super::image::RgbaImage;
use super::oneshot::render_rgba;
use super::style::{GroundPlane, RenderStyle, DEFAULT_BODY_COLOUR};
use crate::error::Result;
use crate::output::atomic_write_with;
use std::path::Path;

/// Writes `image` as an 8-bit RGBA PNG (sRGB) to `path`, atomically.
pub fn write_png(path: &Path, image: &RgbaImage) -> Result<()> {
    image.validate()?;
    atomic_write_with(path, |w| {
        let mut enc = png::Encoder::new(w, image.width, image.height);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_source_srgb(png::SrgbRenderingIntent::Perceptual);
        let mut writer = enc.write_header().map_err(std::io::Error::other)?;
        writer
            .write_image_data(&image.pixels)
            .map_err(std::io::Error::other)?;
        writer.finish().map_err(std::io::Error::other)
    })
}

/// [`render_rgba`], then writes the image to `path` as a PNG (atomically).
#[allow(clippy::too_many_arguments)]
pub fn render_png(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    positions: &[[f32; 4]],
    triangles: &[[u32; 3]],
    camera: &Camera,
    size: (u32, u32),
    ground: Option<GroundPlane>,
    path: &Path,
) -> Result<RgbaImage> {
    let image = render_rgba(device, queue, positions, triangles, camera, size, ground)?;
    write_png(path, &image)?;
    Ok(image)
}

/// CPU-only twin of [`render_png`] (no adapter needed): rasterizes one surface in
/// [`DEFAULT_BODY_COLOUR`] with the default style and writes the PNG to `path`.
pub fn render_png_cpu(
    positions: &[[f32; 4]],
    triangles: &[[u32; 3]],
    camera: &Camera,
    size: (u32, u32),
    ground: Option<GroundPlane>,
    path: &Path,
) -> Result<RgbaImage> {
    let image = render_rgba_cpu(
        &[CpuSurface {
            positions,
            triangles,
            colour: DEFAULT_BODY_COLOUR,
            vertex_colours: None,
        }],
        camera,
        size,
        &RenderStyle::default(),
        ground.as_ref(),
    )?;
    write_png(path, &image)?;
    Ok(image)
}
