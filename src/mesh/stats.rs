//! Mesh statistics for `jello mesh info`.

use crate::mesh::{surface, TetMesh};
use std::fmt;

/// Summary statistics of a tet mesh. Quality is the normalised mean ratio
/// `12 (3V)^(2/3) / Σ ℓ²` (1 = regular tet, → 0 when flat; see [`TetMesh::tet_quality`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MeshInfo {
    /// Number of vertices.
    pub num_vertices: usize,
    /// Number of tets.
    pub num_tets: usize,
    /// Number of boundary triangles.
    pub num_boundary_triangles: usize,
    /// Number of boundary vertices.
    pub num_boundary_vertices: usize,
    /// Vertices used by no tet.
    pub num_unreferenced: usize,
    /// Sum of tet volumes, m³.
    pub volume: f64,
    /// Bounding box `(min, max)`, m.
    pub bbox: ([f64; 3], [f64; 3]),
    /// Mean-ratio quality: minimum, mean, maximum over tets.
    pub quality: [f64; 3],
    /// Edge length: minimum, mean, maximum, m.
    pub edge_length: [f64; 3],
}

impl MeshInfo {
    /// Computes the statistics of `mesh` (all zeros for an empty one).
    pub fn new(mesh: &TetMesh) -> Self {
        let surf = surface(mesh);
        let m = mesh.tets.len();
        let mut q = [f64::INFINITY, 0.0, f64::NEG_INFINITY];
        for t in 0..m {
            let v = mesh.tet_quality(t);
            q[0] = q[0].min(v);
            q[1] += v;
            q[2] = q[2].max(v);
        }
        if m > 0 {
            q[1] /= m as f64;
        } else {
            q = [0.0; 3];
        }
        let (emin, emax) = mesh.edge_length_range().unwrap_or((0.0, 0.0));
        MeshInfo {
            num_vertices: mesh.positions.len(),
            num_tets: m,
            num_boundary_triangles: surf.triangles.len(),
            num_boundary_vertices: surf.vertices.len(),
            num_unreferenced: mesh.unreferenced_vertices().len(),
            volume: mesh.total_volume(),
            bbox: mesh.bounding_box().unwrap_or(([0.0; 3], [0.0; 3])),
            quality: q,
            edge_length: [emin, mesh.mean_edge_length(), emax],
        }
    }
}

impl fmt::Display for MeshInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (lo, hi) = self.bbox;
        writeln!(f, "vertices:          {}", self.num_vertices)?;
        writeln!(f, "tetrahedra:        {}", self.num_tets)?;
        writeln!(
            f,
            "boundary:          {} triangles, {} vertices",
            self.num_boundary_triangles, self.num_boundary_vertices
        )?;
        if self.num_unreferenced > 0 {
            writeln!(f, "unreferenced:      {} vertices", self.num_unreferenced)?;
        }
        writeln!(f, "volume:            {:.6e} m³", self.volume)?;
        writeln!(
            f,
            "bounding box:      [{:.4}, {:.4}, {:.4}] .. [{:.4}, {:.4}, {:.4}] m",
            lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]
        )?;
        writeln!(
            f,
            "size:              {:.4} × {:.4} × {:.4} m",
            hi[0] - lo[0],
            hi[1] - lo[1],
            hi[2] - lo[2]
        )?;
        writeln!(
            f,
            "edge length:       min {:.4e}  mean {:.4e}  max {:.4e} m",
            self.edge_length[0], self.edge_length[1], self.edge_length[2]
        )?;
        write!(
            f,
            "quality (mean ratio, 1 = regular): min {:.3}  mean {:.3}  max {:.3}",
            self.quality[0], self.quality[1], self.quality[2]
        )
    }
}
