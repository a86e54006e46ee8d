//! Look of a rendered frame: background, lights, ground plane. Colours are given in sRGB
//! (the values a colour picker shows, each channel in [0, 1]) and converted to linear for
//! shading.

use super::camera::{Camera, UpAxis};
use glam::Vec3;

/// Default body colour (sRGB): a warm jelly orange.
pub const DEFAULT_BODY_COLOUR: [f32; 3] = [0.93, 0.45, 0.22];

/// Colour of triangle-mesh obstacles in pictures (sRGB): a cool grey, apart from the bodies.
pub const OBSTACLE_COLOUR: [f32; 3] = [0.55, 0.6, 0.68];

/// Global lighting and background of a frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenderStyle {
    /// Background colour (sRGB, [0, 1] per channel).
    pub background: [f32; 3],
    /// Key light intensity (dimensionless multiplier of the base colour).
    pub key_intensity: f32,
    /// Fill light intensity.
    pub fill_intensity: f32,
    /// Ambient intensity.
    pub ambient: f32,
}

impl Default for RenderStyle {
    fn default() -> Self {
        RenderStyle {
            background: [0.94, 0.95, 0.97],
            key_intensity: 0.7,
            fill_intensity: 0.2,
            ambient: 0.22,
        }
    }
}

impl RenderStyle {
    /// Light directions (unit, pointing towards the light) for a camera. They are fixed
    /// relative to the camera — key from above-left-front, fill from the right — so every
    /// framing looks alike, and constant over a run that keeps one camera.
    pub(crate) fn light_dirs(camera: &Camera) -> (Vec3, Vec3) {
        let up = camera.up.normalize_or_zero();
        let back = camera.back();
        let right = camera.right();
        let key = (0.9 * up - 0.55 * right + 0.6 * back).normalize_or(up);
        let fill = (0.15 * up + 0.8 * right + 0.45 * back).normalize_or(back);
        (key, fill)
    }
}

/// A square grey ground plane perpendicular to an up axis, with a faint checker pattern, faded
/// into the background towards its rim. Drawn with a small depth bias so a body resting on it
/// wins the depth test where they touch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroundPlane {
    /// Which axis is normal to the plane.
    pub up: UpAxis,
    /// Height of the plane along `up` (m).
    pub height: f32,
    /// Centre of the square (m); its component along `up` is ignored.
    pub centre: [f32; 3],
    /// Half the side of the square (m); the plane fades out over its outer half.
    pub half_extent: f32,
    /// Checker cell size (m).
    pub cell: f32,
    /// Base colour (sRGB).
    pub colour: [f32; 3],
}

impl GroundPlane {
    /// A ground plane touching the bottom of the box `[bbox_min, bbox_max]` (m) along `up`,
    /// centred under it and a few box radii wide.
    pub fn under_box(bbox_min: [f32; 3], bbox_max: [f32; 3], up: UpAxis) -> Self {
        let (lo, hi) = (Vec3::from(bbox_min), Vec3::from(bbox_max));
        let radius = (0.5 * (hi - lo).length()).max(1e-3);
        let upv = up.vector();
        GroundPlane {
            up,
            height: lo.dot(upv),
            centre: (0.5 * (lo + hi)).to_array(),
            half_extent: 4.0 * radius,
            cell: nice_cell(0.5 * radius),
            colour: [0.72, 0.73, 0.75],
        }
    }

    /// Checks the plane is usable: finite height and centre, positive extent and cell.
    pub fn validate(&self) -> crate::Result<()> {
        let ok = self.height.is_finite()
            && self.centre.iter().all(|c| c.is_finite())
            && self.half_extent.is_finite()
            && self.half_extent > 0.0
            && self.cell.is_finite()
            && self.cell > 0.0
            && self.colour.iter().all(|c| c.is_finite());
        if ok {
            Ok(())
        } else {
            Err(crate::JelloError::Invalid(format!(
                "render: ground plane needs finite height/centre/colour and positive \
                 half_extent and cell, got {self:?}"
            )))
        }
    }

    /// The plane's two in-plane unit axes (u, v) with u × v = up.
    pub(crate) fn axes(&self) -> (Vec3, Vec3) {
        match self.up {
            UpAxis::Y => (Vec3::Z, Vec3::X),
            UpAxis::Z => (Vec3::X, Vec3::Y),
        }
    }

    /// Centre projected onto the plane (m).
    pub(crate) fn plane_centre(&self) -> Vec3 {
        let upv = self.up.vector();
        let c = Vec3::from(self.centre);
        c - c.dot(upv) * upv + self.height * upv
    }

    /// The four corners (xyzw, w = 1), ordered so that (0, 1, 2), (0, 2, 3) face `up`.
    pub(crate) fn corners(&self) -> [[f32; 4]; 4] {
        let (u, v) = self.axes();
        let c = self.plane_centre();
        let h = self.half_extent;
        let corner = |a: f32, b: f32| {
            let p = c + h * (a * u + b * v);
            [p.x, p.y, p.z, 1.0]
        };
        [
            corner(-1.0, -1.0),
            corner(1.0, -1.0),
            corner(1.0, 1.0),
            corner(-1.0, 1.0),
        ]
    }
}

/// Rounds a length down to 1, 2 or 5 × a power of ten so checker cells have tidy sizes.
fn nice_cell(len: f32) -> f32 {
    let p = 10f32.powf(len.log10().floor());
    let m = len / p;
    let k = if m >= 5.0 {
        5.0
    } else if m >= 2.0 {
        2.0
    } else {
        1.0
    };
    k * p
}

/// sRGB → linear for one channel (IEC 61966-2-1).
pub fn srgb_to_linear(c: f32) -> f32 {
    let c = c.clamp(0.0, 1.0);
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// sRGB triple → linear triple.
pub(crate) fn srgb3_to_linear(c: [f32; 3]) -> [f32; 3] {
    c.map(srgb_to_linear)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ground_corners_face_up() {
        for up in [UpAxis::Y, UpAxis::Z] {
            let g = GroundPlane::under_box([0.0; 3], [1.0; 3], up);
            let c = g.corners().map(|p| Vec3::new(p[0], p[1], p[2]));
            let n = (c[1] - c[0]).cross(c[2] - c[0]);
            assert!(n.normalize().dot(up.vector()) > 0.999, "{up:?}: {n}");
            for p in c {
                assert!((p.dot(up.vector()) - 0.0).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn nice_cell_rounds_down_to_125() {
        for (x, want) in [
            (0.37, 0.2),
            (0.07, 0.05),
            (1.0, 1.0),
            (9.9, 5.0),
            (23.0, 20.0),
        ] {
            assert!(
                (nice_cell(x) - want).abs() < 1e-5 * want,
                "{x} → {}",
                nice_cell(x)
            );
        }
    }

    #[test]
    fn srgb_transfer_matches_known_points() {
        // 0.5 sRGB ≈ 0.2140 linear; 1 → 1; 0 → 0.
        assert!((srgb_to_linear(0.5) - 0.21404).abs() < 1e-4);
        assert_eq!(srgb_to_linear(1.0), 1.0);
        assert_eq!(srgb_to_linear(0.0), 0.0);
    }
}
