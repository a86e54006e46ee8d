//! The drawn surface of a soft body: a Bevy `Mesh` of the tet mesh's boundary triangles.
//!
//! Bodies drawn from jello's device buffer ([`crate::gpu_surface`]) use the mesh as built, at
//! rest. For the others (solvers other than Newton on Bevy's device, and the CPU fallback),
//! after each fixed step the surface's positions and normals are written from jello's f64 state
//! into the `Mesh` asset on the CPU, and Bevy uploads the changed asset.

use bevy::asset::RenderAssetUsages;
use bevy::mesh::{Indices, PrimitiveTopology};
use bevy::prelude::*;
use jello::mesh::TetMesh;

/// The boundary of a tet mesh, with its vertices renumbered compactly for a Bevy mesh.
#[derive(Clone, Debug)]
pub struct Surface {
    /// Tet-mesh vertex of each surface vertex (ascending).
    pub vertices: Vec<u32>,
    /// Triangles over surface vertices, wound counter-clockwise seen from outside.
    pub triangles: Vec<[u32; 3]>,
}

impl Surface {
    /// The boundary of `mesh`.
    pub fn of(mesh: &TetMesh) -> Self {
        let s = jello::mesh::surface(mesh);
        Surface {
            triangles: s.local_triangles(),
            vertices: s.vertices,
        }
    }

    /// A Bevy mesh of this surface at positions `x` (the tet mesh's, flattened, m): positions
    /// and normals (f32), so 24 bytes a vertex in Bevy's vertex buffer, in that order.
    pub fn mesh(&self, x: &[f64], usage: RenderAssetUsages) -> Mesh {
        let (positions, normals) = self.positions_and_normals(x);
        Mesh::new(PrimitiveTopology::TriangleList, usage)
            .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
            .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
            .with_inserted_indices(Indices::U32(self.triangles.concat()))
    }

    /// Writes positions `x` (the tet mesh's, flattened, m) and their normals into `mesh`, one
    /// made by [`Surface::mesh`].
    pub fn update(&self, mesh: &mut Mesh, x: &[f64]) {
        let (positions, normals) = self.positions_and_normals(x);
        mesh.insert_attribute(Mesh::ATTRIBUTE_POSITION, positions);
        mesh.insert_attribute(Mesh::ATTRIBUTE_NORMAL, normals);
    }

    /// Surface positions (f32, m) and unit vertex normals: the area-weighted sum of the
    /// adjacent triangles' normals (the cross product's length is twice the area, so summing
    /// unnormalised cross products weights by area).
    pub fn positions_and_normals(&self, x: &[f64]) -> (Vec<[f32; 3]>, Vec<[f32; 3]>) {
        let positions: Vec<Vec3> = self
            .vertices
            .iter()
            .map(|&v| {
                let i = 3 * v as usize;
                Vec3::new(x[i] as f32, x[i + 1] as f32, x[i + 2] as f32)
            })
            .collect();
        let mut normals = vec![Vec3::ZERO; positions.len()];
        for t in &self.triangles {
            let [a, b, c] = t.map(|k| positions[k as usize]);
            let n = (b - a).cross(c - a);
            for k in t {
                normals[*k as usize] += n;
            }
        }
        (
            positions.iter().map(|p| p.to_array()).collect(),
            normals
                .iter()
                .map(|n| n.normalize_or(Vec3::Y).to_array())
                .collect(),
        )
    }
}
