//! One-call rendering for headless CLI use.

use super::camera::Camera;
use super::cpu::CpuSurface;
use super::image::RgbaImage;
use super::style::{GroundPlane, DEFAULT_BODY_COLOUR};
use super::surface::SurfaceRenderer;
use super::upload::SurfaceMesh;
use crate::error::Result;

/// Uploads one surface, draws it once (in [`DEFAULT_BODY_COLOUR`], over `ground` if given)
/// with 4× MSAA into a `size = (width, height)` image and reads it back.
pub fn render_rgba(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    positions: &[[f32; 4]],
    triangles: &[[u32; 3]],
    camera: &Camera,
    size: (u32, u32),
    ground: Option<GroundPlane>,
) -> Result<RgbaImage> {
    let mesh = SurfaceMesh::new(device, positions, triangles)?;
    let mut renderer = SurfaceRenderer::new(device, size)?;
    renderer.set_ground(ground)?;
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("jello render_png"),
    });
    renderer.record(
        device,
        &mut encoder,
        &[mesh.draw(DEFAULT_BODY_COLOUR)],
        camera,
    )?;
    queue.submit([encoder.finish()]);
    renderer.read_rgba(device, queue)
}

/// Several surfaces in one image (each in its own colour, over `ground` if given), on the GPU
/// with 4× MSAA — [`render_rgba`] for more than one body (e.g. a deformable body and a
/// triangle-mesh obstacle). `vertex_colours` of the draws are ignored here.
pub fn render_rgba_surfaces(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    surfaces: &[CpuSurface<'_>],
    camera: &Camera,
    size: (u32, u32),
    ground: Option<GroundPlane>,
) -> Result<RgbaImage> {
    let meshes = surfaces
        .iter()
        .map(|s| SurfaceMesh::new(device, s.positions, s.triangles))
        .collect::<Result<Vec<_>>>()?;
    let draws: Vec<_> = meshes
        .iter()
        .zip(surfaces)
        .map(|(m, s)| m.draw(s.colour))
        .collect();
    let mut renderer = SurfaceRenderer::new(device, size)?;
    renderer.set_ground(ground)?;
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("jello render_rgba_surfaces"),
    });
    renderer.record(device, &mut encoder, &draws, camera)?;
    queue.submit([encoder.finish()]);
    renderer.read_rgba(device, queue)
}
