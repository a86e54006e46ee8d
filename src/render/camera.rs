//! Pinhole camera: look-at view + perspective projection, and a fixed 3/4 framing of a box.
//!
//! Conventions: world space is right-handed, in metres. The default up axis is +Y (viewer looks
//! roughly along −Z, +X to the right); [`UpAxis::Z`] gives the Z-up convention (viewer looks
//! roughly along +Y, +X to the right). Clip space is wgpu's: x, y ∈ [−1, 1] with +y up, depth
//! z ∈ [0, 1] (0 at the near plane). Pixel coordinates have their origin at the top-left corner
//! of the image, +x right, +y down, pixel centres at half-integers.

use crate::error::{JelloError, Result};
use glam::{Mat4, Vec3, Vec4};

/// Which world axis points up. Used by [`Camera::framing_with_up`] and by the ground plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UpAxis {
    /// +Y up (the default; glTF / most viewers).
    #[default]
    Y,
    /// +Z up (CAD / robotics convention).
    Z,
}

impl UpAxis {
    /// The unit up vector.
    pub fn vector(self) -> Vec3 {
        match self {
            UpAxis::Y => Vec3::Y,
            UpAxis::Z => Vec3::Z,
        }
    }

    /// The unit "towards the default viewer" vector (the axis the 3/4 view looks against).
    fn front(self) -> Vec3 {
        match self {
            UpAxis::Y => Vec3::Z,
            UpAxis::Z => Vec3::NEG_Y,
        }
    }
}

/// A perspective look-at camera. All lengths in metres, angles in degrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    /// Eye position (world, m).
    pub eye: Vec3,
    /// Point looked at (world, m); the image centre.
    pub target: Vec3,
    /// Approximate up direction (world); need not be orthogonal to the view direction but must
    /// not be parallel to it.
    pub up: Vec3,
    /// Vertical field of view, degrees, in (0, 180).
    pub fov_y_deg: f32,
    /// Width / height of the image.
    pub aspect: f32,
    /// Near clip distance from the eye (m), > 0.
    pub near: f32,
    /// Far clip distance from the eye (m), > near.
    pub far: f32,
}

/// Where [`Camera::framing_view`] looks from. The default is the fixed 3/4 view used by
/// [`Camera::framing`]: +Y up, azimuth 35°, elevation 25°, 35° vertical FOV, 8 % margin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FramingView {
    /// World up axis.
    pub up: UpAxis,
    /// Rotation of the viewpoint about the up axis, degrees, from the "front" axis (+Z when
    /// Y is up, −Y when Z is up) towards +X.
    pub azimuth_deg: f32,
    /// Height of the viewpoint above the horizontal, degrees, in (−90, 90).
    pub elevation_deg: f32,
    /// Vertical field of view, degrees, in (0, 180).
    pub fov_y_deg: f32,
    /// Space around the box: 1.0 lets the outermost corner touch the image border.
    pub margin: f32,
}

impl Default for FramingView {
    fn default() -> Self {
        FramingView {
            up: UpAxis::Y,
            azimuth_deg: 35.0,
            elevation_deg: 25.0,
            fov_y_deg: 35.0,
            margin: 1.08,
        }
    }
}

impl Camera {
    /// A camera at `eye` looking at `target`. Near/far default to 1/100 and 100 times the
    /// eye–target distance: a 10⁴ range keeps the 32-bit depth buffer resolving about 10⁻⁵ of
    /// that distance at the target. Set `near`/`far` directly for other scenes.
    pub fn look_at(
        eye: impl Into<Vec3>,
        target: impl Into<Vec3>,
        up: impl Into<Vec3>,
        fov_y_deg: f32,
        aspect: f32,
    ) -> Self {
        let (eye, target) = (eye.into(), target.into());
        // A zero distance is caught by `validate`; keep near > 0 so only that error shows.
        let d = eye.distance(target).max(1e-6);
        Camera {
            eye,
            target,
            up: up.into(),
            fov_y_deg,
            aspect,
            near: 0.01 * d,
            far: 100.0 * d,
        }
    }

    /// A fixed 3/4 view ([`FramingView::default`]: azimuth 35°, elevation 25°, 35° vertical
    /// FOV), +Y up, that frames the
    /// axis-aligned box `[bbox_min, bbox_max]` (m) for an image of the given aspect (w / h).
    /// Using one camera for every frame of a run keeps the frames comparable: pass the box of
    /// the whole run, or the first frame's box padded for the expected motion.
    pub fn framing(
        bbox_min: impl Into<Vec3>,
        bbox_max: impl Into<Vec3>,
        aspect: f32,
    ) -> Result<Self> {
        Self::framing_with_up(bbox_min, bbox_max, aspect, UpAxis::Y)
    }

    /// [`Camera::framing`] with a chosen up axis.
    pub fn framing_with_up(
        bbox_min: impl Into<Vec3>,
        bbox_max: impl Into<Vec3>,
        aspect: f32,
        up: UpAxis,
    ) -> Result<Self> {
        let view = FramingView {
            up,
            ..Default::default()
        };
        Self::framing_view(bbox_min, bbox_max, aspect, &view)
    }

    /// A camera looking at the centre of the box `[bbox_min, bbox_max]` (m) from the direction
    /// `view` gives, at the smallest distance that keeps all eight corners inside the image
    /// (with the view's margin).
    pub fn framing_view(
        bbox_min: impl Into<Vec3>,
        bbox_max: impl Into<Vec3>,
        aspect: f32,
        view: &FramingView,
    ) -> Result<Self> {
        let up = view.up;
        if !(view.azimuth_deg.is_finite()
            && view.elevation_deg.abs() < 90.0
            && view.fov_y_deg > 0.0
            && view.fov_y_deg < 180.0
            && view.margin.is_finite()
            && view.margin > 0.0)
        {
            return Err(JelloError::Invalid(format!(
                "camera framing: need finite azimuth, |elevation| < 90, fov in (0, 180), \
                 margin > 0; got {view:?}"
            )));
        }
        let (lo, hi) = (bbox_min.into(), bbox_max.into());
        if !(lo.is_finite() && hi.is_finite()) {
            return Err(JelloError::Invalid(format!(
                "camera framing: bounding box is not finite ({lo} .. {hi})"
            )));
        }
        if lo.cmpgt(hi).any() {
            return Err(JelloError::Invalid(format!(
                "camera framing: bounding box min {lo} exceeds max {hi}"
            )));
        }
        if !(aspect.is_finite() && aspect > 0.0) {
            return Err(JelloError::Invalid(format!(
                "camera framing: aspect ratio must be positive, got {aspect}"
            )));
        }
        let centre = 0.5 * (lo + hi);
        // A point or a flat box still needs a finite viewing distance.
        let radius = (0.5 * (hi - lo).length()).max(1e-3);
        let (az, el) = (
            view.azimuth_deg.to_radians(),
            view.elevation_deg.to_radians(),
        );
        let upv = up.vector();
        let front = up.front();
        let right = upv.cross(front); // Y-up: Y × Z = X; Z-up: Z × (−Y) = X.
        let dir = (front * az.cos() + right * az.sin()) * el.cos() + upv * el.sin();
        // Camera basis for a view along −dir (same construction as `view_matrix`).
        let fwd = -dir;
        let s_axis = fwd.cross(upv).normalize();
        let u_axis = s_axis.cross(fwd);
        let tan_y = (0.5 * view.fov_y_deg.to_radians()).tan();
        let tan_x = tan_y * aspect;
        // Smallest eye distance along `dir` that keeps every box corner inside the image with
        // the margin: a corner at offset r from the centre sits at depth dist − r·dir and
        // lateral offsets (r·s, r·u), so it fits when
        //   dist ≥ r·dir + margin · max(|r·s| / tan_x, |r·u| / tan_y).
        // Tighter than fitting the bounding sphere for long or flat boxes.
        let mut dist = 0f32;
        let mut nearest = f32::MIN; // largest r·dir: the corner closest to the eye
        for k in 0..8 {
            let corner = Vec3::new(
                if k & 1 == 0 { lo.x } else { hi.x },
                if k & 2 == 0 { lo.y } else { hi.y },
                if k & 4 == 0 { lo.z } else { hi.z },
            );
            let r = corner - centre;
            let along = r.dot(dir);
            let lateral = (r.dot(s_axis).abs() / tan_x).max(r.dot(u_axis).abs() / tan_y);
            dist = dist.max(along + view.margin * lateral);
            nearest = nearest.max(along);
        }
        // Keep the eye clear of the box even when it is degenerate.
        let dist = dist.max(nearest + 0.05 * radius).max(radius);
        Ok(Camera {
            eye: centre + dist * dir,
            target: centre,
            up: upv,
            fov_y_deg: view.fov_y_deg,
            aspect,
            // The nearest corner is at depth dist − nearest > 0; the far plane also leaves room
            // for a ground plane a few radii wide.
            near: ((dist - nearest) * 0.5).max(dist * 1e-3),
            far: dist + 8.0 * radius,
        })
    }

    /// Checks the parameters describe a usable camera.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(JelloError::Invalid(format!("camera: {msg}")));
        if !(self.eye.is_finite() && self.target.is_finite() && self.up.is_finite()) {
            return bad("eye, target and up must be finite".into());
        }
        let dir = self.target - self.eye;
        if dir.length_squared() == 0.0 {
            return bad("eye and target coincide".into());
        }
        if dir.normalize().cross(self.up).length_squared() < 1e-12 {
            return bad("up is zero or parallel to the view direction".into());
        }
        if !(self.fov_y_deg > 0.0 && self.fov_y_deg < 180.0) {
            return bad(format!(
                "fov_y_deg must be in (0, 180), got {}",
                self.fov_y_deg
            ));
        }
        if !(self.aspect.is_finite() && self.aspect > 0.0) {
            return bad(format!("aspect must be positive, got {}", self.aspect));
        }
        if !(self.near > 0.0 && self.far > self.near && self.far.is_finite()) {
            return bad(format!(
                "need 0 < near < far, got near {} far {}",
                self.near, self.far
            ));
        }
        Ok(())
    }

    /// The same camera for a different image aspect (w / h).
    pub fn with_aspect(mut self, aspect: f32) -> Self {
        self.aspect = aspect;
        self
    }

    /// World → view transform (right-handed, camera looks along −Z).
    pub fn view_matrix(&self) -> Mat4 {
        let f = (self.target - self.eye).normalize_or_zero();
        let s = f.cross(self.up).normalize_or_zero();
        let u = s.cross(f);
        Mat4::from_cols(
            Vec4::new(s.x, u.x, -f.x, 0.0),
            Vec4::new(s.y, u.y, -f.y, 0.0),
            Vec4::new(s.z, u.z, -f.z, 0.0),
            Vec4::new(-s.dot(self.eye), -u.dot(self.eye), f.dot(self.eye), 1.0),
        )
    }

    /// View → clip transform (wgpu depth range [0, 1]).
    pub fn projection_matrix(&self) -> Mat4 {
        let h = 1.0 / (0.5 * self.fov_y_deg.to_radians()).tan();
        let w = h / self.aspect;
        // Maps view depth −near → 0 and −far → 1 (after the divide by w = −z_view).
        let r = self.far / (self.near - self.far);
        Mat4::from_cols(
            Vec4::new(w, 0.0, 0.0, 0.0),
            Vec4::new(0.0, h, 0.0, 0.0),
            Vec4::new(0.0, 0.0, r, -1.0),
            Vec4::new(0.0, 0.0, r * self.near, 0.0),
        )
    }

    /// World → clip transform.
    pub fn view_proj(&self) -> Mat4 {
        self.projection_matrix() * self.view_matrix()
    }

    /// Unit vector pointing from the target towards the eye.
    pub fn back(&self) -> Vec3 {
        (self.eye - self.target).normalize_or_zero()
    }

    /// Unit vector pointing to the right of the image, in world space.
    pub fn right(&self) -> Vec3 {
        (self.target - self.eye).cross(self.up).normalize_or_zero()
    }

    /// Projects a world point (m) to pixel coordinates of a `width × height` image (origin top
    /// left, +y down), with its depth in [0, 1]. `None` when the point is behind the eye or
    /// outside the near/far range.
    pub fn project_to_pixel(
        &self,
        p: impl Into<Vec3>,
        width: u32,
        height: u32,
    ) -> Option<[f32; 3]> {
        let clip = self.view_proj() * Vec4::from((p.into(), 1.0));
        if clip.w <= 0.0 {
            return None;
        }
        let ndc = clip.truncate() / clip.w;
        if !(0.0..=1.0).contains(&ndc.z) {
            return None;
        }
        Some([
            (ndc.x + 1.0) * 0.5 * width as f32,
            (1.0 - ndc.y) * 0.5 * height as f32,
            ndc.z,
        ])
    }
}

/// Axis-aligned bounding box of `xyzw` positions (w ignored), or `None` when empty.
pub fn bounding_box(positions: &[[f32; 4]]) -> Option<([f32; 3], [f32; 3])> {
    let mut it = positions.iter();
    let first = it.next()?;
    let mut lo = Vec3::new(first[0], first[1], first[2]);
    let mut hi = lo;
    for p in it {
        let v = Vec3::new(p[0], p[1], p[2]);
        lo = lo.min(v);
        hi = hi.max(v);
    }
    Some((lo.to_array(), hi.to_array()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_ndc(c: &Camera, p: Vec3) -> Vec3 {
        let q = c.view_proj() * Vec4::from((p, 1.0));
        q.truncate() / q.w
    }

    #[test]
    fn target_projects_to_centre_and_planes_to_depth_range() {
        let c = Camera::look_at([3.0, 2.0, 5.0], [0.5, -0.2, 0.1], Vec3::Y, 40.0, 1.5);
        let t = to_ndc(&c, c.target);
        assert!(t.x.abs() < 1e-5 && t.y.abs() < 1e-5, "{t}");
        let fwd = (c.target - c.eye).normalize();
        let near = to_ndc(&c, c.eye + c.near * fwd);
        let far = to_ndc(&c, c.eye + c.far * fwd);
        assert!(near.z.abs() < 1e-4, "near depth {}", near.z);
        assert!((far.z - 1.0).abs() < 1e-4, "far depth {}", far.z);
    }

    #[test]
    fn screen_axes_follow_right_and_up() {
        let c = Camera::look_at([0.0, 0.0, 5.0], [0.0, 0.0, 0.0], Vec3::Y, 60.0, 1.0);
        // Looking down −Z with +Y up: +X is right, +Y is up on screen.
        let r = to_ndc(&c, Vec3::new(1.0, 0.0, 0.0));
        let u = to_ndc(&c, Vec3::new(0.0, 1.0, 0.0));
        assert!(r.x > 0.1 && r.y.abs() < 1e-6);
        assert!(u.y > 0.1 && u.x.abs() < 1e-6);
        // A point at the edge of the vertical FOV lands on ndc y = 1.
        let edge = Vec3::new(0.0, 5.0 * (30f32).to_radians().tan(), 0.0);
        assert!((to_ndc(&c, edge).y - 1.0).abs() < 1e-5);
        let px = c
            .project_to_pixel(Vec3::new(0.0, 0.0, 0.0), 200, 100)
            .unwrap();
        assert!((px[0] - 100.0).abs() < 1e-3 && (px[1] - 50.0).abs() < 1e-3);
        let above = c
            .project_to_pixel(Vec3::new(0.0, 1.0, 0.0), 200, 100)
            .unwrap();
        assert!(above[1] < 50.0, "+Y must go up the image (smaller row)");
        assert!(c
            .project_to_pixel(Vec3::new(0.0, 0.0, 6.0), 200, 100)
            .is_none());
    }

    #[test]
    fn framing_keeps_box_inside_image() {
        for up in [UpAxis::Y, UpAxis::Z] {
            for aspect in [0.5f32, 1.0, 2.0] {
                let (lo, hi) = (Vec3::new(-1.0, 0.0, 2.0), Vec3::new(3.0, 0.5, 2.2));
                let c = Camera::framing_with_up(lo, hi, aspect, up).unwrap();
                c.validate().unwrap();
                let mut min_edge = f32::MAX;
                for i in 0..8 {
                    let p = Vec3::new(
                        if i & 1 == 0 { lo.x } else { hi.x },
                        if i & 2 == 0 { lo.y } else { hi.y },
                        if i & 4 == 0 { lo.z } else { hi.z },
                    );
                    let n = to_ndc(&c, p);
                    assert!(n.x.abs() < 1.0 && n.y.abs() < 1.0, "{up:?} {aspect}: {n}");
                    assert!(n.z > 0.0 && n.z < 1.0);
                    min_edge = min_edge.min(1.0 - n.x.abs().max(n.y.abs()));
                }
                // Tight: the outermost corner comes close to the border (margin 8%).
                assert!(
                    min_edge < 0.5,
                    "{up:?} {aspect}: box too small ({min_edge})"
                );
                // The view comes from above: the eye is higher than the target along up.
                assert!((c.eye - c.target).dot(up.vector()) > 0.0);
            }
        }
    }

    #[test]
    fn framing_view_looks_from_the_requested_side() {
        // Azimuth 180° looks from the back (−Z when Y is up); elevation 60° from well above.
        let view = FramingView {
            azimuth_deg: 180.0,
            elevation_deg: 60.0,
            ..Default::default()
        };
        let c = Camera::framing_view([-1.0; 3], [1.0; 3], 1.0, &view).unwrap();
        let d = (c.eye - c.target).normalize();
        assert!(d.z < -0.45 && d.y > 0.85 && d.x.abs() < 1e-5, "{d}");
        let bad = FramingView {
            elevation_deg: 90.0,
            ..Default::default()
        };
        assert!(Camera::framing_view([0.0; 3], [1.0; 3], 1.0, &bad).is_err());
    }

    #[test]
    fn framing_rejects_bad_boxes() {
        assert!(Camera::framing([0.0, f32::NAN, 0.0], [1.0; 3], 1.0).is_err());
        assert!(Camera::framing([2.0, 0.0, 0.0], [1.0; 3], 1.0).is_err());
        assert!(Camera::framing([0.0; 3], [1.0; 3], 0.0).is_err());
        // A degenerate (point) box still frames.
        assert!(Camera::framing([1.0; 3], [1.0; 3], 1.0).is_ok());
    }

    #[test]
    fn bounding_box_of_points() {
        assert_eq!(bounding_box(&[]), None);
        let b = bounding_box(&[[1.0, -2.0, 3.0, 0.0], [-1.0, 5.0, 0.0, 9.0]]).unwrap();
        assert_eq!(b, ([-1.0, -2.0, 0.0], [1.0, 5.0, 3.0]));
    }
}
