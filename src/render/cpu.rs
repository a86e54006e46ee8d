//! CPU fallback rasterizer: the same look as [`super::SurfaceRenderer`] (same lights, ground
//! plane, background, 4 samples per pixel) without any GPU adapter, so headless runs can still
//! write frames. A z-buffered, flat-shaded triangle rasterizer with near-plane clipping;
//! horizontal bands of the image are rasterized in parallel.

use super::camera::Camera;
use super::image::RgbaImage;
use super::lighting::FrameParams;
use super::style::{srgb3_to_linear, GroundPlane, RenderStyle};
use super::upload::validate_surface;
use crate::error::{JelloError, Result};
use glam::{Vec2, Vec3, Vec4};
use rayon::prelude::*;

/// One surface for the CPU rasterizer: positions (xyzw, w ignored, m), outward-oriented
/// triangles, base colour (sRGB), or a colour per vertex interpolated across each triangle
/// (a scalar field painted on the surface, e.g. the residual picture).
#[derive(Clone, Copy, Debug)]
pub struct CpuSurface<'a> {
    /// Vertex positions, same layout as the GPU position buffer.
    pub positions: &'a [[f32; 4]],
    /// Vertex indices, three per triangle.
    pub triangles: &'a [[u32; 3]],
    /// Base colour (sRGB, [0, 1] per channel).
    pub colour: [f32; 3],
    /// A colour per vertex (sRGB, one per position) used instead of `colour` when given:
    /// interpolated perspective-correctly in linear space, then lit like `colour`.
    pub vertex_colours: Option<&'a [[f32; 3]]>,
}

/// Largest image side accepted (pixels); matches common GPU texture limits.
pub const CPU_MAX_SIDE: u32 = 16384;

/// Sample offsets from the pixel centre (pixels): the standard 4× MSAA pattern, so edges
/// antialias like the GPU path.
const SAMPLES: [Vec2; 4] = [
    Vec2::new(-2.0 / 16.0, -6.0 / 16.0),
    Vec2::new(6.0 / 16.0, -2.0 / 16.0),
    Vec2::new(-6.0 / 16.0, 2.0 / 16.0),
    Vec2::new(2.0 / 16.0, 6.0 / 16.0),
];

/// Rows per parallel band.
const BAND_ROWS: u32 = 16;

/// A clipped, projected triangle ready to rasterize.
struct ScreenTri {
    /// Screen position (pixels, origin top left, +y down).
    p: [Vec2; 3],
    /// Depth in [0, 1] (linear in screen space).
    z: [f32; 3],
    /// 1 / w per vertex, for perspective-correct interpolation.
    inv_w: [f32; 3],
    /// World position / w per vertex.
    world_w: [Vec3; 3],
    /// Unit face normal (world).
    normal: Vec3,
    /// Linear base colour per corner, divided by that corner's w (perspective-correct
    /// interpolation), unless `uniform`.
    base_w: [Vec3; 3],
    /// Linear base colour of the whole triangle, when it has one.
    uniform: Option<Vec3>,
    is_ground: bool,
    /// Added to the depth before the test (ground only; mirrors the GPU depth bias).
    bias: f32,
    /// Pixel rows covered, inclusive.
    rows: (u32, u32),
}

/// Rasterizes `draws` (and `ground`, if given) seen through `camera` into a `size` image.
pub fn render_rgba_cpu(
    draws: &[CpuSurface<'_>],
    camera: &Camera,
    size: (u32, u32),
    style: &RenderStyle,
    ground: Option<&GroundPlane>,
) -> Result<RgbaImage> {
    let (w, h) = size;
    if w == 0 || h == 0 || w > CPU_MAX_SIDE || h > CPU_MAX_SIDE {
        return Err(JelloError::Invalid(format!(
            "render: image size {w}×{h} must be within 1..={CPU_MAX_SIDE} on each side"
        )));
    }
    camera.validate()?;
    for (i, d) in draws.iter().enumerate() {
        validate_surface(d.positions, d.triangles)
            .map_err(|e| JelloError::Invalid(format!("draws[{i}]: {e}")))?;
        if !d.colour.iter().all(|c| c.is_finite()) {
            return Err(JelloError::Invalid(format!(
                "render: draws[{i}]: colour {:?} is not finite",
                d.colour
            )));
        }
        if let Some(vc) = d.vertex_colours {
            if vc.len() != d.positions.len() {
                return Err(JelloError::Invalid(format!(
                    "render: draws[{i}]: {} vertex colours for {} positions",
                    vc.len(),
                    d.positions.len()
                )));
            }
            if let Some(v) = vc.iter().position(|c| !c.iter().all(|x| x.is_finite())) {
                return Err(JelloError::Invalid(format!(
                    "render: draws[{i}]: vertex colour {v} {:?} is not finite",
                    vc[v]
                )));
            }
        }
    }
    if let Some(g) = ground {
        g.validate()?;
    }
    let frame = FrameParams::new(camera, style, ground);

    let mut tris = Vec::new();
    for d in draws {
        let base = Vec3::from(srgb3_to_linear(d.colour));
        let linear: Option<Vec<Vec3>> = d
            .vertex_colours
            .map(|vc| vc.iter().map(|c| Vec3::from(srgb3_to_linear(*c))).collect());
        for t in d.triangles {
            let v = t.map(|i| {
                let p = d.positions[i as usize];
                Vec3::new(p[0], p[1], p[2])
            });
            let colour = match &linear {
                Some(l) => Corners::PerVertex(t.map(|i| l[i as usize])),
                None => Corners::Uniform(base),
            };
            setup_triangle(&frame, v, colour, false, size, &mut tris);
        }
    }
    if let (Some(g), Some(gp)) = (ground, frame.ground) {
        let c = g.corners().map(|p| Vec3::new(p[0], p[1], p[2]));
        for v in [[c[0], c[1], c[2]], [c[0], c[2], c[3]]] {
            setup_triangle(
                &frame,
                v,
                Corners::Uniform(gp.colour),
                true,
                size,
                &mut tris,
            );
        }
    }

    let n_samples = SAMPLES.len();
    let mut pixels = vec![0u8; 4 * w as usize * h as usize];
    pixels
        .par_chunks_mut(4 * w as usize * BAND_ROWS as usize)
        .enumerate()
        .for_each(|(band, out)| {
            let y0 = band as u32 * BAND_ROWS;
            let rows = (out.len() / (4 * w as usize)) as u32;
            let y1 = y0 + rows; // exclusive
            let mut depth = vec![1.0f32; (w * rows) as usize * n_samples];
            let mut colour = vec![frame.background; (w * rows) as usize * n_samples];
            for t in tris.iter().filter(|t| t.rows.1 >= y0 && t.rows.0 < y1) {
                raster_band(&frame, t, w, y0, y1, &mut depth, &mut colour);
            }
            for (px, rgba) in out.chunks_exact_mut(4).enumerate() {
                let s = &colour[px * n_samples..(px + 1) * n_samples];
                let avg = s.iter().copied().sum::<Vec3>() / n_samples as f32;
                rgba[0] = encode_srgb(avg.x);
                rgba[1] = encode_srgb(avg.y);
                rgba[2] = encode_srgb(avg.z);
                rgba[3] = 255;
            }
        });
    Ok(RgbaImage {
        width: w,
        height: h,
        pixels,
    })
}

/// A triangle's linear base colour: one for all of it, or one per corner.
#[derive(Clone, Copy)]
enum Corners {
    Uniform(Vec3),
    PerVertex([Vec3; 3]),
}

/// Clips a world-space triangle against the near plane, projects it and appends the pieces.
fn setup_triangle(
    frame: &FrameParams,
    v: [Vec3; 3],
    colour: Corners,
    is_ground: bool,
    size: (u32, u32),
    out: &mut Vec<ScreenTri>,
) {
    let normal = (v[1] - v[0]).cross(v[2] - v[0]);
    if !normal.is_finite() || normal.length_squared() <= 0.0 {
        return; // degenerate: covers no area
    }
    let normal = normal.normalize();
    // Sutherland–Hodgman against the near plane z_clip ≥ 0 (wgpu clip space); behind it the
    // perspective divide is meaningless.
    let corner = match colour {
        Corners::Uniform(c) => [c; 3],
        Corners::PerVertex(c) => c,
    };
    let mut poly: Vec<(Vec4, Vec3, Vec3)> = Vec::with_capacity(4);
    let clip = v.map(|p| frame.view_proj * p.extend(1.0));
    for i in 0..3 {
        let j = (i + 1) % 3;
        let (a, b) = ((clip[i], v[i], corner[i]), (clip[j], v[j], corner[j]));
        let (ina, inb) = (a.0.z >= 0.0, b.0.z >= 0.0);
        if ina {
            poly.push(a);
        }
        if ina != inb {
            let t = a.0.z / (a.0.z - b.0.z);
            poly.push((a.0.lerp(b.0, t), a.1.lerp(b.1, t), a.2.lerp(b.2, t)));
        }
    }
    if poly.len() < 3 {
        return;
    }
    let (w, h) = (size.0 as f32, size.1 as f32);
    let project = |(c, world, base): (Vec4, Vec3, Vec3)| {
        let inv_w = 1.0 / c.w;
        let p = Vec2::new((c.x * inv_w + 1.0) * 0.5 * w, (1.0 - c.y * inv_w) * 0.5 * h);
        (p, c.z * inv_w, inv_w, world * inv_w, base * inv_w)
    };
    let pts: Vec<_> = poly.into_iter().map(project).collect();
    for k in 1..pts.len() - 1 {
        let tri = [pts[0], pts[k], pts[k + 1]];
        let p = tri.map(|t| t.0);
        let area = (p[1] - p[0]).perp_dot(p[2] - p[0]);
        if area.is_nan() || area.abs() <= 1e-12 || !p.iter().all(|q| q.is_finite()) {
            continue;
        }
        let ymin = p.iter().map(|q| q.y).fold(f32::MAX, f32::min);
        let ymax = p.iter().map(|q| q.y).fold(f32::MIN, f32::max);
        if ymax < 0.0 || ymin >= h {
            continue;
        }
        let z = tri.map(|t| t.1);
        // Ground depth bias: a constant plus twice the depth slope per pixel, like the GPU
        // pipeline's `DepthBiasState { constant, slope_scale: 2 }`.
        let bias = if is_ground {
            let dzdx =
                ((z[1] - z[0]) * (p[2].y - p[0].y) - (z[2] - z[0]) * (p[1].y - p[0].y)) / area;
            let dzdy =
                ((z[2] - z[0]) * (p[1].x - p[0].x) - (z[1] - z[0]) * (p[2].x - p[0].x)) / area;
            2.0 * dzdx.abs().max(dzdy.abs()) + 2e-6
        } else {
            0.0
        };
        out.push(ScreenTri {
            p,
            z,
            inv_w: tri.map(|t| t.2),
            world_w: tri.map(|t| t.3),
            normal,
            base_w: tri.map(|t| t.4),
            uniform: match colour {
                Corners::Uniform(c) => Some(c),
                Corners::PerVertex(_) => None,
            },
            is_ground,
            bias,
            rows: (
                ymin.max(0.0).floor() as u32,
                (ymax.min(h - 1.0)).max(0.0).floor() as u32,
            ),
        });
    }
}

/// Rasterizes one triangle into the rows [y0, y1) of the band buffers.
fn raster_band(
    frame: &FrameParams,
    t: &ScreenTri,
    width: u32,
    y0: u32,
    y1: u32,
    depth: &mut [f32],
    colour: &mut [Vec3],
) {
    let n_samples = SAMPLES.len();
    let [a, b, c] = t.p;
    let area = (b - a).perp_dot(c - a);
    let inv_area = 1.0 / area;
    let xmin = a.x.min(b.x).min(c.x).max(0.0).floor() as u32;
    let xmax = (a.x.max(b.x).max(c.x).min(width as f32 - 1.0))
        .max(0.0)
        .floor() as u32;
    let (r0, r1) = (t.rows.0.max(y0), t.rows.1.min(y1 - 1));
    for y in r0..=r1 {
        for x in xmin..=xmax {
            for (s, off) in SAMPLES.iter().enumerate() {
                let q = Vec2::new(x as f32 + 0.5, y as f32 + 0.5) + *off;
                // Barycentrics from signed sub-areas; dividing by the signed total makes the
                // test independent of winding (two-sided, like the GPU path).
                let l0 = (c - b).perp_dot(q - b) * inv_area;
                let l1 = (a - c).perp_dot(q - c) * inv_area;
                let l2 = 1.0 - l0 - l1;
                if l0 < 0.0 || l1 < 0.0 || l2 < 0.0 {
                    continue;
                }
                let z = l0 * t.z[0] + l1 * t.z[1] + l2 * t.z[2];
                if !(0.0..=1.0).contains(&z) {
                    continue;
                }
                let idx = ((y - y0) * width + x) as usize * n_samples + s;
                let zt = z + t.bias;
                if zt >= depth[idx] {
                    continue;
                }
                depth[idx] = zt;
                let iw = l0 * t.inv_w[0] + l1 * t.inv_w[1] + l2 * t.inv_w[2];
                let world = (l0 * t.world_w[0] + l1 * t.world_w[1] + l2 * t.world_w[2]) / iw;
                let base = t.uniform.unwrap_or_else(|| {
                    (l0 * t.base_w[0] + l1 * t.base_w[1] + l2 * t.base_w[2]) / iw
                });
                colour[idx] = frame.shade(world, t.normal, base, t.is_ground);
            }
        }
    }
}

/// Linear [0, 1] → 8-bit sRGB.
fn encode_srgb(c: f32) -> u8 {
    let c = c.clamp(0.0, 1.0);
    let s = if c <= 0.003_130_8 {
        12.92 * c
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    };
    (s * 255.0).round() as u8
}
