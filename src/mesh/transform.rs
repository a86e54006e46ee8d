//! Rigid and scaling transforms of a [`TetMesh`], used by scenes to place objects.

use crate::error::{JelloError, Result};
use crate::mesh::TetMesh;

impl TetMesh {
    /// Moves every vertex by `d` (m).
    pub fn translate(&mut self, d: [f64; 3]) {
        for p in &mut self.positions {
            for k in 0..3 {
                p[k] += d[k];
            }
        }
    }

    /// Rotates about the origin by `degrees` around `axis` (right-hand rule; the axis need not be
    /// unit length). Fails on a zero or non-finite axis or angle.
    pub fn rotate(&mut self, axis: [f64; 3], degrees: f64) -> Result<()> {
        self.rotate_about(axis, degrees, [0.0; 3])
    }

    /// Rotates about the point `pivot` (m) by `degrees` around `axis`.
    pub fn rotate_about(&mut self, axis: [f64; 3], degrees: f64, pivot: [f64; 3]) -> Result<()> {
        let n = (axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]).sqrt();
        if !(n > 0.0 && n.is_finite() && degrees.is_finite()) {
            return Err(JelloError::Invalid(format!(
                "rotation needs a non-zero finite axis and a finite angle (axis {axis:?}, {degrees}°)"
            )));
        }
        let [x, y, z] = axis.map(|a| a / n);
        let (s, c) = degrees.to_radians().sin_cos();
        let t = 1.0 - c;
        // Rodrigues' rotation matrix.
        let r = [
            [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
            [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
            [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
        ];
        for p in &mut self.positions {
            let q = [p[0] - pivot[0], p[1] - pivot[1], p[2] - pivot[2]];
            for i in 0..3 {
                p[i] = pivot[i] + r[i][0] * q[0] + r[i][1] * q[1] + r[i][2] * q[2];
            }
        }
        Ok(())
    }

    /// Scales uniformly about the origin by `factor` (> 0).
    pub fn scale(&mut self, factor: f64) -> Result<()> {
        if !(factor > 0.0 && factor.is_finite()) {
            return Err(JelloError::Invalid(format!(
                "scale factor must be positive and finite, got {factor}"
            )));
        }
        self.scale_xyz([factor; 3])
    }

    /// Scales about the origin by a factor per axis. Negative factors mirror the mesh; an odd
    /// number of them flips every tet's orientation, which is then repaired so tets stay
    /// positive. Zero or non-finite factors are refused (they would flatten the mesh).
    pub fn scale_xyz(&mut self, factors: [f64; 3]) -> Result<()> {
        if factors.iter().any(|f| *f == 0.0 || !f.is_finite()) {
            return Err(JelloError::Invalid(format!(
                "scale factors must be non-zero and finite, got {factors:?}"
            )));
        }
        for p in &mut self.positions {
            for k in 0..3 {
                p[k] *= factors[k];
            }
        }
        if factors[0] * factors[1] * factors[2] < 0.0 {
            for t in &mut self.tets {
                t.swap(2, 3);
            }
        }
        Ok(())
    }

    /// Scales uniformly about the bounding-box centre so that the box's largest side is `size`
    /// (m). Fails for an empty mesh, a mesh of zero extent, or a non-positive size.
    pub fn fit_largest_extent(&mut self, size: f64) -> Result<()> {
        if !(size > 0.0 && size.is_finite()) {
            return Err(JelloError::Invalid(format!(
                "target size must be positive and finite, got {size}"
            )));
        }
        let (lo, hi) = self
            .bounding_box()
            .ok_or_else(|| JelloError::Invalid("cannot fit an empty mesh".into()))?;
        let ext = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
        if ext <= 0.0 {
            return Err(JelloError::Invalid(
                "cannot fit a mesh of zero extent".into(),
            ));
        }
        let c = [0, 1, 2].map(|k| 0.5 * (lo[k] + hi[k]));
        let f = size / ext;
        for p in &mut self.positions {
            for k in 0..3 {
                p[k] = c[k] + (p[k] - c[k]) * f;
            }
        }
        Ok(())
    }
}
