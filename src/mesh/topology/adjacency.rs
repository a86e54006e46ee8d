//! Compressed (CSR) adjacency: vertex → incident tets and vertex → neighbouring vertices.
//! Plain `Vec<u32>` arrays so they upload to GPU storage buffers as they are.

use crate::mesh::TetMesh;

/// For each vertex, the tets that use it and which corner (0..=3) it is in each.
/// Entries of vertex `v` are `offsets[v]..offsets[v+1]`, in increasing tet order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VertexTets {
    /// `num_vertices + 1` offsets into `tets`/`local`.
    pub offsets: Vec<u32>,
    /// Incident tet indices.
    pub tets: Vec<u32>,
    /// Corner of the vertex within the matching tet (0..=3).
    pub local: Vec<u8>,
}

impl VertexTets {
    /// Builds the vertex → tet incidence of `mesh`.
    pub fn new(mesh: &TetMesh) -> Self {
        let n = mesh.positions.len();
        let mut offsets = vec![0u32; n + 1];
        for t in &mesh.tets {
            for &v in t {
                offsets[v as usize + 1] += 1;
            }
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let total = offsets[n] as usize;
        let mut fill: Vec<u32> = offsets[..n].to_vec();
        let mut tets = vec![0u32; total];
        let mut local = vec![0u8; total];
        for (t, tet) in mesh.tets.iter().enumerate() {
            for (k, &v) in tet.iter().enumerate() {
                let slot = &mut fill[v as usize];
                tets[*slot as usize] = t as u32;
                local[*slot as usize] = k as u8;
                *slot += 1;
            }
        }
        VertexTets {
            offsets,
            tets,
            local,
        }
    }

    /// `(tet, corner)` pairs of vertex `v`.
    pub fn of(&self, v: usize) -> impl Iterator<Item = (u32, u8)> + '_ {
        let r = self.offsets[v] as usize..self.offsets[v + 1] as usize;
        self.tets[r.clone()]
            .iter()
            .copied()
            .zip(self.local[r].iter().copied())
    }

    /// Entries packed as `tet * 4 + corner` (one u32 each), for a single GPU buffer.
    pub fn packed(&self) -> Vec<u32> {
        self.tets
            .iter()
            .zip(&self.local)
            .map(|(&t, &l)| t * 4 + l as u32)
            .collect()
    }
}

/// Vertex → vertex adjacency (two vertices are neighbours when they share a tet), CSR, neighbour
/// lists sorted ascending, a vertex never listed as its own neighbour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VertexAdjacency {
    /// `num_vertices + 1` offsets into `neighbours`.
    pub offsets: Vec<u32>,
    /// Neighbour vertex indices.
    pub neighbours: Vec<u32>,
}

impl VertexAdjacency {
    /// Builds the vertex graph of `mesh` (the sparsity pattern of its stiffness matrix, minus the
    /// diagonal).
    pub fn new(mesh: &TetMesh) -> Self {
        let vt = VertexTets::new(mesh);
        let n = mesh.positions.len();
        let mut offsets = Vec::with_capacity(n + 1);
        let mut neighbours = Vec::new();
        offsets.push(0u32);
        let mut scratch: Vec<u32> = Vec::new();
        for v in 0..n {
            scratch.clear();
            for (t, _) in vt.of(v) {
                for &u in &mesh.tets[t as usize] {
                    if u as usize != v {
                        scratch.push(u);
                    }
                }
            }
            scratch.sort_unstable();
            scratch.dedup();
            neighbours.extend_from_slice(&scratch);
            offsets.push(neighbours.len() as u32);
        }
        VertexAdjacency {
            offsets,
            neighbours,
        }
    }

    /// Neighbours of vertex `v`.
    pub fn of(&self, v: usize) -> &[u32] {
        &self.neighbours[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }
}
