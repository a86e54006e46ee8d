//! The tetrahedral mesh type shared by every part of jello.

/// A linear tetrahedral mesh.
///
/// Positions are in metres. Tets hold 0-based vertex indices and are positively oriented
/// (signed volume `(x1-x0)·((x2-x0)×(x3-x0)) / 6 > 0`); readers reorient negative ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TetMesh {
    /// Vertex positions, metres.
    pub positions: Vec<[f64; 3]>,
    /// Tetrahedra, 4 vertex indices each.
    pub tets: Vec<[u32; 4]>,
}

impl TetMesh {
    /// Number of vertices.
    pub fn num_vertices(&self) -> usize {
        self.positions.len()
    }
    /// Number of tetrahedra.
    pub fn num_tets(&self) -> usize {
        self.tets.len()
    }
    /// Signed volume of tet `t` in m³ (positive when positively oriented).
    pub fn signed_volume(&self, t: usize) -> f64 {
        let [a, b, c, d] = self.tets[t].map(|i| self.positions[i as usize]);
        let e1 = sub(b, a);
        let e2 = sub(c, a);
        let e3 = sub(d, a);
        dot(e1, cross(e2, e3)) / 6.0
    }
    /// Axis-aligned bounding box `(min, max)` in metres; `None` for an empty mesh.
    pub fn bounding_box(&self) -> Option<([f64; 3], [f64; 3])> {
        let first = *self.positions.first()?;
        let mut lo = first;
        let mut hi = first;
        for p in &self.positions {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        Some((lo, hi))
    }
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
