//! Per-frame shading parameters shared by the GPU pipeline (uploaded as a uniform) and the CPU
//! rasterizer, plus the CPU twin of the fragment shader in `surface.wgsl`. Keeping one source
//! for the parameters is what makes the two paths produce the same look.

use super::camera::Camera;
use super::style::{srgb3_to_linear, GroundPlane, RenderStyle};
use glam::{Mat4, Vec3};

/// Ground-plane parameters in the form the shader uses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroundParams {
    /// Centre on the plane (m).
    pub centre: Vec3,
    /// Radius over which the plane fades into the background (m).
    pub fade_radius: f32,
    /// In-plane axes.
    pub u: Vec3,
    pub v: Vec3,
    /// Checker cell size (m).
    pub cell: f32,
    /// Base colour (linear).
    pub colour: Vec3,
}

/// Everything the shading of one frame depends on besides the geometry. Colours are linear.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameParams {
    pub view_proj: Mat4,
    pub eye: Vec3,
    pub key_dir: Vec3,
    pub key_intensity: f32,
    pub fill_dir: Vec3,
    pub fill_intensity: f32,
    /// The ground's up when there is a ground plane (its shading normal), else the camera's.
    pub up: Vec3,
    pub ambient: f32,
    pub background: Vec3,
    pub ground: Option<GroundParams>,
}

impl FrameParams {
    pub fn new(camera: &Camera, style: &RenderStyle, ground: Option<&GroundPlane>) -> Self {
        let (key_dir, fill_dir) = RenderStyle::light_dirs(camera);
        let ground = ground.map(|g| {
            let (u, v) = g.axes();
            GroundParams {
                centre: g.plane_centre(),
                fade_radius: g.half_extent,
                u,
                v,
                cell: g.cell,
                colour: Vec3::from(srgb3_to_linear(g.colour)),
            }
        });
        let up = match &ground {
            // u × v = the ground's up (see `GroundPlane::axes`).
            Some(g) => g.u.cross(g.v),
            None => camera.up.normalize_or_zero(),
        };
        FrameParams {
            view_proj: camera.view_proj(),
            eye: camera.eye,
            key_dir,
            key_intensity: style.key_intensity,
            fill_dir,
            fill_intensity: style.fill_intensity,
            up,
            ambient: style.ambient,
            background: Vec3::from(srgb3_to_linear(style.background)),
            ground,
        }
    }

    /// Linear colour of a surface point, mirroring `fs_main` in `surface.wgsl`: `normal` is the
    /// unit face normal (either orientation), `base` the linear base colour.
    pub fn shade(&self, world: Vec3, normal: Vec3, base: Vec3, is_ground: bool) -> Vec3 {
        let to_eye = (self.eye - world).normalize_or_zero();
        let mut n = if normal.length_squared() > 0.0 {
            normal
        } else {
            to_eye
        };
        if n.dot(to_eye) < 0.0 {
            n = -n;
        }
        let mut base = base;
        let ground = if is_ground { self.ground } else { None };
        if let Some(g) = &ground {
            n = self.up;
            let rel = world - g.centre;
            let cell = g.cell.max(1e-6);
            let cu = (rel.dot(g.u) / cell).floor() as i32;
            let cv = (rel.dot(g.v) / cell).floor() as i32;
            if (cu + cv) & 1 == 1 {
                base *= 0.88;
            }
        }
        let hemi = 0.75 + 0.25 * n.dot(self.up);
        let light = self.ambient * hemi
            + self.key_intensity * n.dot(self.key_dir).max(0.0)
            + self.fill_intensity * n.dot(self.fill_dir).max(0.0);
        let mut colour = base * light;
        if ground.is_none() {
            let h = (self.key_dir + to_eye).normalize_or_zero();
            colour += Vec3::splat(0.12 * n.dot(h).max(0.0).powf(48.0));
        }
        if let Some(g) = &ground {
            let rel = world - g.centre;
            let r = (rel - rel.dot(self.up) * self.up).length();
            let fade_r = g.fade_radius.max(1e-6);
            let t = smoothstep(0.55 * fade_r, fade_r, r);
            colour = colour.lerp(self.background, t);
        }
        colour
    }
}

/// WGSL's `smoothstep`.
fn smoothstep(e0: f32, e1: f32, x: f32) -> f32 {
    let t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}
