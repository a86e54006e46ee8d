//! Offscreen rendering of deformed surfaces to RGBA images and PNG files.
//!
//! [`SurfaceRenderer`] draws straight from position buffers the simulation owns
//! (`array<vec4<f32>>`, xyz in metres) plus `u32` index buffers of outward-oriented surface
//! triangles, with flat shading reconstructed in the fragment shader from screen-space
//! derivatives (no normal buffer), a key + fill + ambient light, a per-body colour, an optional
//! checkered ground plane and a light background. It borrows the caller's `wgpu::Device` and
//! `wgpu::Queue`, so a host application can embed it.
//!
//! Conventions are in [`camera`]: right-handed world in metres, +Y up by default
//! ([`UpAxis::Z`] for Z-up), image origin at the top left.
//!
//! [`render_png`] is the one-call path for headless CLI use; [`render_png_cpu`] /
//! [`render_rgba_cpu`] give the same look with no GPU adapter at all.
//!
//! Per-frame use with buffers the simulation already holds on the GPU:
//!
//! ```no_run
//! # fn frames(device: &wgpu::Device, queue: &wgpu::Queue, positions: &wgpu::Buffer,
//! #           surface_indices: &wgpu::Buffer, n_indices: u32,
//! #           lo: [f32; 3], hi: [f32; 3]) -> jello::Result<()> {
//! use jello::render::{Camera, GroundPlane, SurfaceDraw, SurfaceRenderer, UpAxis};
//! let size = (800, 600);
//! let mut renderer = SurfaceRenderer::new(device, size)?;
//! // One camera for the whole run: frame the first frame's box, padded for the motion.
//! let camera = Camera::framing(lo, hi, renderer.aspect())?;
//! renderer.set_ground(Some(GroundPlane::under_box(lo, hi, UpAxis::Y)))?;
//! for frame in 0..10 {
//!     // ... the simulation's compute passes update `positions` ...
//!     let mut encoder = device.create_command_encoder(&Default::default());
//!     let draw = SurfaceDraw {
//!         positions,
//!         indices: surface_indices,
//!         index_count: n_indices,
//!         colour: [0.93, 0.45, 0.22],
//!     };
//!     renderer.record(device, &mut encoder, &[draw], &camera)?;
//!     queue.submit([encoder.finish()]);
//!     let image = renderer.read_rgba(device, queue)?;
//!     jello::render::write_png(format!("frame_{frame:04}.png").as_ref(), &image)?;
//! }
//! # Ok(()) }
//! ```

pub mod camera;
mod colormap;
#[cfg(feature = "pictures")]
mod colour_bar;
mod cpu;
mod image;
mod lighting;
mod oneshot;
#[cfg(feature = "pictures")]
mod png;
mod style;
mod surface;
#[cfg(feature = "pictures")]
pub(crate) mod text;
mod upload;

pub use camera::{bounding_box, Camera, FramingView, UpAxis};
pub use colormap::{viridis, LogScale, NO_VALUE_COLOUR};
#[cfg(feature = "pictures")]
pub use colour_bar::draw_colour_bar;
pub use cpu::{render_rgba_cpu, CpuSurface, CPU_MAX_SIDE};
pub use image::RgbaImage;
pub use oneshot::{render_rgba, render_rgba_surfaces};
#[cfg(feature = "pictures")]
pub use png::{render_png, render_png_cpu, write_png};
pub use style::{srgb_to_linear, GroundPlane, RenderStyle, DEFAULT_BODY_COLOUR, OBSTACLE_COLOUR};
pub use surface::{
    SurfaceDraw, SurfaceRenderer, COLOUR_FORMAT, DEPTH_FORMAT, MAX_DRAWS, POSITION_STRIDE,
    READBACK_TIMEOUT,
};
pub use upload::{positions_to_vec4, validate_surface, SurfaceMesh};
