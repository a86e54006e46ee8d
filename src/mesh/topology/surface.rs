//! The boundary surface of a tet mesh: faces used by exactly one tet, oriented outward.

use crate::mesh::TetMesh;

/// Boundary triangles of a tet mesh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundarySurface {
    /// Boundary faces as mesh vertex indices, counter-clockwise seen from outside (the normal
    /// `(b-a)×(c-a)` points out of the solid).
    pub triangles: Vec<[u32; 3]>,
    /// Mesh vertices on the boundary, sorted ascending, without repeats.
    pub vertices: Vec<u32>,
}

/// The four faces of a positively oriented tet `[a,b,c,d]`, each wound so its normal points away
/// from the opposite vertex (face `k` is opposite corner `k`).
pub const TET_FACES: [[usize; 3]; 4] = [[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]];

impl BoundarySurface {
    /// Triangles with vertex indices into [`BoundarySurface::vertices`] instead of the mesh
    /// (for writing the surface alone).
    pub fn local_triangles(&self) -> Vec<[u32; 3]> {
        self.triangles
            .iter()
            .map(|t| {
                t.map(|v| {
                    // `vertices` is sorted and holds every triangle corner.
                    self.vertices.binary_search(&v).unwrap_or(0) as u32
                })
            })
            .collect()
    }

    /// Number of distinct edges of the surface.
    pub fn num_edges(&self) -> usize {
        let mut e: Vec<(u32, u32)> = self
            .triangles
            .iter()
            .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
            .map(|(a, b)| (a.min(b), a.max(b)))
            .collect();
        e.sort_unstable();
        e.dedup();
        e.len()
    }

    /// Euler characteristic V − E + F (2 for each closed genus-0 component).
    pub fn euler_characteristic(&self) -> i64 {
        self.vertices.len() as i64 - self.num_edges() as i64 + self.triangles.len() as i64
    }
}

/// Boundary surface of `mesh`: the faces that belong to exactly one tet, wound outward (tets
/// must be positively oriented, as every loaded or generated mesh is). Faces shared by more than
/// two tets (non-manifold input) are not boundary and are left out.
pub fn surface(mesh: &TetMesh) -> BoundarySurface {
    // (sorted face key, tet, local face) sorted by key; runs of length 1 are boundary faces.
    let mut faces: Vec<([u32; 3], u32, u8)> = Vec::with_capacity(4 * mesh.tets.len());
    for (t, tet) in mesh.tets.iter().enumerate() {
        for (f, idx) in TET_FACES.iter().enumerate() {
            let mut key = idx.map(|k| tet[k]);
            key.sort_unstable();
            faces.push((key, t as u32, f as u8));
        }
    }
    faces.sort_unstable_by_key(|x| x.0);
    let mut triangles = Vec::new();
    let mut i = 0;
    while i < faces.len() {
        let mut j = i + 1;
        while j < faces.len() && faces[j].0 == faces[i].0 {
            j += 1;
        }
        if j - i == 1 {
            let (_, t, f) = faces[i];
            let tet = mesh.tets[t as usize];
            triangles.push(TET_FACES[f as usize].map(|k| tet[k]));
        }
        i = j;
    }
    let mut vertices: Vec<u32> = triangles.iter().flatten().copied().collect();
    vertices.sort_unstable();
    vertices.dedup();
    BoundarySurface {
        triangles,
        vertices,
    }
}
