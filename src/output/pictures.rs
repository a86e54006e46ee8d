//! PNG frames of a run (`jello run --png`): the surface renderer on a GPU adapter when one
//! exists, the CPU rasterizer (same look) otherwise, with one fixed camera for the whole run.

use crate::error::Result;
use crate::gpu::GpuDevice;
use crate::mesh::surface;
use crate::problem::{Model, Obstacle};
use crate::render::{
    draw_colour_bar, render_rgba_cpu, render_rgba_surfaces, write_png, Camera, CpuSurface,
    GroundPlane, LogScale, RenderStyle, RgbaImage, UpAxis, DEFAULT_BODY_COLOUR, OBSTACLE_COLOUR,
};
use std::path::Path;

/// Renders frames of one model with a fixed camera.
pub struct FramePainter {
    gpu: Option<GpuDevice>,
    camera: Camera,
    ground: Option<GroundPlane>,
    triangles: Vec<[u32; 3]>,
    /// Triangle-mesh obstacles of IPC contact: their contact model (for scripted positions)
    /// and their triangles, indexed into the obstacle vertices alone.
    obstacles: Option<(std::sync::Arc<crate::contact::IpcContact>, Vec<[u32; 3]>)>,
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
        let obstacles = model.contact.as_ref().and_then(|ipc| {
            let m = &ipc.mesh;
            let n = m.num_model_vertices as u32;
            let tris: Vec<[u32; 3]> = m
                .faces
                .iter()
                .zip(&m.face_body)
                .filter(|(_, &b)| m.bodies[b as usize].kind == crate::contact::BodyKind::Obstacle)
                .map(|(f, _)| f.map(|v| v - n))
                .collect();
            (!tris.is_empty()).then(|| (ipc.clone(), tris))
        });
        // The frame holds the obstacles where they start too.
        if let Some((ipc, _)) = &obstacles {
            for p in &ipc.mesh.obstacle_positions {
                for k in 0..3 {
                    lo[k] = lo[k].min(p[k] as f32);
                    hi[k] = hi[k].max(p[k] as f32);
                }
            }
        }
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
            obstacles,
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

    /// Renders positions `x` (flattened, m) at time `t` (s: where scripted obstacles are) to
    /// `path`; triangle-mesh obstacles are drawn in [`OBSTACLE_COLOUR`].
    pub fn paint(&self, x: &[f64], t: f64, path: &Path) -> Result<RgbaImage> {
        let pos: Vec<[f32; 4]> = x
            .chunks_exact(3)
            .map(|c| [c[0] as f32, c[1] as f32, c[2] as f32, 1.0])
            .collect();
        let obstacle_pos: Vec<[f32; 4]> = match &self.obstacles {
            Some((ipc, _)) => ipc
                .obstacle_positions_at(t)
                .iter()
                .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 1.0])
                .collect(),
            None => Vec::new(),
        };
        let mut surfaces = vec![CpuSurface {
            positions: &pos,
            triangles: &self.triangles,
            colour: DEFAULT_BODY_COLOUR,
            vertex_colours: None,
        }];
        if let Some((_, tris)) = &self.obstacles {
            surfaces.push(CpuSurface {
                positions: &obstacle_pos,
                triangles: tris,
                colour: OBSTACLE_COLOUR,
                vertex_colours: None,
            });
        }
        let image = match &self.gpu {
            Some(g) => render_rgba_surfaces(
                g.device(),
                g.queue(),
                &surfaces,
                &self.camera,
                self.size,
                self.ground,
            )?,
            None => render_rgba_cpu(
                &surfaces,
                &self.camera,
                self.size,
                &RenderStyle::default(),
                self.ground.as_ref(),
            )?,
        };
        write_png(path, &image)?;
        Ok(image)
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
