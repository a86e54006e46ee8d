//! PNG frames of a run (`jello run --png`): the surface renderer on a GPU adapter when one
//! exists, the CPU rasterizer (same look) otherwise, with one fixed camera for the whole run.

use crate::error::Result;
use crate::gpu::GpuDevice;
use crate::mesh::surface;
use crate::problem::{Model, Obstacle};
use crate::render::{
    draw_colour_bar, render_png, render_png_cpu, render_rgba_cpu, write_png, Camera, CpuSurface,
    GroundPlane, LogScale, RenderStyle, RgbaImage, UpAxis, DEFAULT_BODY_COLOUR,
};
use std::path::Path;

/// Renders frames of one model with a fixed camera.
pub struct FramePainter {
    gpu: Option<GpuDevice>,
    camera: Camera,
    ground: Option<GroundPlane>,
    triangles: Vec<[u32; 3]>,
    size: (u32, u32),
}

impl FramePainter {
    /// A painter for `model` at `size` pixels. The camera frames the rest bounding box grown by
    /// 25% on every side (and down to a ground obstacle, if any), so moving bodies stay in view.
    /// `use_gpu` tries a headless adapter first; without one the CPU rasterizer is used.
    pub fn new(model: &Model, size: (u32, u32), use_gpu: bool) -> Result<Self> {
        let (lo, hi) = model.mesh.bounding_box().unwrap_or(([0.0; 3], [1.0; 3]));
        let mut lo = lo.map(|v| v as f32);
        let mut hi = hi.map(|v| v as f32);
        let mut ground = None;
        for o in &model.obstacles {
            if let Obstacle::HalfSpace { normal, offset } = o {
                if normal[1] > 0.99 {
                    let h = *offset as f32;
                    lo[1] = lo[1].min(h);
                    let mut g = GroundPlane::under_box(lo, hi, UpAxis::Y);
                    g.height = h;
                    ground = Some(g);
                }
            }
        }
        for k in 0..3 {
            let pad = 0.25 * (hi[k] - lo[k]).max(1e-3);
            if ground.is_none() || k != 1 {
                lo[k] -= pad;
            }
            hi[k] += pad;
        }
        let camera = Camera::framing(lo, hi, size.0 as f32 / size.1 as f32)?;
        let gpu = if use_gpu {
            GpuDevice::new_headless().ok()
        } else {
            None
        };
        Ok(FramePainter {
            gpu,
            camera,
            ground,
            triangles: surface(&model.mesh).triangles,
            size,
        })
    }

    /// The camera used for every frame.
    pub fn camera(&self) -> &Camera {
        &self.camera
    }

    /// Whether frames are drawn on a GPU adapter.
    pub fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// Renders positions `x` (flattened, m) to `path`.
    pub fn paint(&self, x: &[f64], path: &Path) -> Result<RgbaImage> {
        let pos: Vec<[f32; 4]> = x
            .chunks_exact(3)
            .map(|c| [c[0] as f32, c[1] as f32, c[2] as f32, 1.0])
            .collect();
        match &self.gpu {
            Some(g) => render_png(
                g.device(),
                g.queue(),
                &pos,
                &self.triangles,
                &self.camera,
                self.size,
                self.ground,
                path,
            ),
            None => render_png_cpu(
                &pos,
                &self.triangles,
                &self.camera,
                self.size,
                self.ground,
                path,
            ),
        }
    }
    /// Renders positions `x` (flattened, m) to `path` with each vertex coloured by `values`
    /// (one per vertex, e.g. ‖∇E‖ in N) on a log₁₀ viridis scale from the smallest to the
    /// largest positive value, vertices whose value is not positive and finite (pinned ones) in
    /// grey, and a colour bar at the right edge labelled with that minimum and maximum (`unit`
    /// appended) under `title`. Drawn by the CPU rasterizer (the GPU pipeline has one colour
    /// per draw), in the same look and camera as [`Self::paint`]. Returns the image and the
    /// scale (`None` when no value is positive: the body is then drawn grey, with no bar).
    pub fn paint_field(
        &self,
        x: &[f64],
        values: &[f64],
        unit: &str,
        title: &str,
        path: &Path,
    ) -> Result<(RgbaImage, Option<LogScale>)> {
        let pos: Vec<[f32; 4]> = x
            .chunks_exact(3)
            .map(|c| [c[0] as f32, c[1] as f32, c[2] as f32, 1.0])
            .collect();
        if values.len() != pos.len() {
            return Err(crate::JelloError::Invalid(format!(
                "paint_field: {} values for {} vertices",
                values.len(),
                pos.len()
            )));
        }
        let scale = LogScale::spanning(values);
        let colours: Vec<[f32; 3]> = values
            .iter()
            .map(|&v| match &scale {
                Some(s) => s.colour(v),
                None => crate::render::NO_VALUE_COLOUR,
            })
            .collect();
        let mut image = render_rgba_cpu(
            &[CpuSurface {
                positions: &pos,
                triangles: &self.triangles,
                colour: DEFAULT_BODY_COLOUR,
                vertex_colours: Some(&colours),
            }],
            &self.camera,
            self.size,
            &RenderStyle::default(),
            self.ground.as_ref(),
        )?;
        if let Some(s) = &scale {
            draw_colour_bar(&mut image, s, unit, title);
        }
        write_png(path, &image)?;
        Ok((image, scale))
    }
}
