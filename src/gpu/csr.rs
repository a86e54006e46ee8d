//! The vertex→element CSR the gather kernels walk.

use super::GpuPair;
use crate::{JelloError, Result};

/// For each vertex v, the (tet, corner) pairs it belongs to:
/// `tets[offsets[v]..offsets[v+1]]` and `local[..]` (corner 0–3), tets in increasing order.
/// [`VertexCsr::from_pairs`] builds the same adjacency over contact pairs (pair, slot 0–3) for
/// the `ipc_gather` kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VertexCsr {
    /// `num_vertices + 1` row starts.
    pub offsets: Vec<u32>,
    /// Element ids.
    pub tets: Vec<u32>,
    /// Corner of the vertex in that element (0..4), stored as u32 for the GPU.
    pub local: Vec<u32>,
}

impl VertexCsr {
    /// Builds the CSR; errors on an index ≥ `num_vertices` or more than u32::MAX entries.
    pub fn new(tets: &[[u32; 4]], num_vertices: usize) -> Result<Self> {
        let entries = tets
            .len()
            .checked_mul(4)
            .filter(|&n| n <= u32::MAX as usize);
        let Some(entries) = entries else {
            return Err(JelloError::Invalid("too many tets for a u32 CSR".into()));
        };
        let mut count = vec![0u32; num_vertices + 1];
        for (e, t) in tets.iter().enumerate() {
            for &v in t {
                if v as usize >= num_vertices {
                    return Err(JelloError::Invalid(format!(
                        "tet {e} references vertex {v}, mesh has {num_vertices}"
                    )));
                }
                count[v as usize + 1] += 1;
            }
        }
        for i in 0..num_vertices {
            count[i + 1] += count[i];
        }
        let offsets = count.clone();
        let mut next = count;
        let mut ct = vec![0u32; entries];
        let mut cl = vec![0u32; entries];
        for (e, t) in tets.iter().enumerate() {
            for (l, &v) in t.iter().enumerate() {
                let k = next[v as usize] as usize;
                ct[k] = e as u32;
                cl[k] = l as u32;
                next[v as usize] += 1;
            }
        }
        Ok(VertexCsr {
            offsets,
            tets: ct,
            local: cl,
        })
    }
    /// The vertex→(pair, slot) adjacency of contact pairs ([`GpuPair::v`] in slot order), over
    /// `num_vertices` (every vertex a pair may name: model vertices, then obstacle vertices).
    /// Errors as [`VertexCsr::new`].
    pub fn from_pairs(pairs: &[GpuPair], num_vertices: usize) -> Result<Self> {
        let stencils: Vec<[u32; 4]> = pairs.iter().map(|p| p.v).collect();
        Self::new(&stencils, num_vertices)
    }
    /// Number of vertices.
    pub fn num_vertices(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
}

/// Per vertex the surface triangles it is a corner of, for the surface-barrier kernels
/// (`jgs2_face_terms`, `jgs2_face_bound`, `vertex_solve`): `vfaces[0..=nv]` are row starts into
/// `vfaces` itself (the triangles of vertex v are `vfaces[vfaces[v]..vfaces[v + 1]]`), and
/// `tris[f]` holds triangle f's corners in xyz and the bits of its surface mass (kg, f32, the
/// barrier weight's [`Model::surface_mass`](crate::problem::Model::surface_mass)) in w.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SurfaceCsr {
    /// Row starts (`nv + 1`), then triangle ids.
    pub vfaces: Vec<u32>,
    /// Corners and surface-mass bits per triangle (one zero placeholder when there are none).
    pub tris: Vec<[u32; 4]>,
}

impl SurfaceCsr {
    /// The model's boundary triangles. Errors when the rows do not fit u32 indices.
    pub fn new(model: &crate::problem::Model) -> Result<Self> {
        let nv = model.num_vertices();
        let base = nv
            .checked_add(1)
            .filter(|b| {
                b.checked_add(model.surface_faces.len())
                    .is_some_and(|n| n <= u32::MAX as usize)
            })
            .ok_or_else(|| JelloError::Invalid("surface too large for u32 indices".into()))?;
        if model.surface_offsets.len() != nv + 1 {
            return Err(JelloError::Invalid(format!(
                "surface rows: {} offsets for {nv} vertices",
                model.surface_offsets.len()
            )));
        }
        let mut vfaces: Vec<u32> = model
            .surface_offsets
            .iter()
            .map(|&o| o + base as u32)
            .collect();
        vfaces.extend_from_slice(&model.surface_faces);
        let mut tris: Vec<[u32; 4]> = model
            .surface
            .triangles
            .iter()
            .zip(&model.surface_mass)
            .map(|(t, &m)| [t[0], t[1], t[2], (m as f32).to_bits()])
            .collect();
        if tris.is_empty() {
            tris.push([0; 4]);
        }
        Ok(SurfaceCsr { vfaces, tris })
    }

    /// No triangles at any of `nv` vertices (what a model without spheres or boxes uploads: the
    /// kernels then skip the surface work).
    pub fn empty(nv: usize) -> Self {
        SurfaceCsr {
            vfaces: vec![(nv + 1) as u32; nv + 1],
            tris: vec![[0; 4]],
        }
    }
}

/// Per vertex the surface edges it is an end of, for the edge–edge barrier against boxes
/// (`jgs2_edge_terms`): `vedges[0..=nv]` are row starts into `vedges` itself (the edges of vertex
/// v are `vedges[vedges[v]..vedges[v + 1]]`), and `edges[e]` holds edge e's ends, the bits of its
/// mass share (kg, f32: [`Model::edge_mass`](crate::problem::Model::edge_mass), the barrier
/// weight's) and of its squared rest length (m², f32: the mollifier's threshold).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SurfaceEdgeCsr {
    /// Row starts (`nv + 1`), then edge ids.
    pub vedges: Vec<u32>,
    /// Ends, mass-share bits and squared-rest-length bits per edge (one zero placeholder when
    /// there are none).
    pub edges: Vec<[u32; 4]>,
}

impl SurfaceEdgeCsr {
    /// The model's surface edges. Errors when the rows do not fit u32 indices or disagree with
    /// the model's edge list.
    pub fn new(model: &crate::problem::Model) -> Result<Self> {
        let nv = model.num_vertices();
        let base = nv
            .checked_add(1)
            .filter(|b| {
                b.checked_add(model.edge_list.len())
                    .is_some_and(|n| n <= u32::MAX as usize)
            })
            .ok_or_else(|| JelloError::Invalid("surface edges too many for u32 indices".into()))?;
        if model.edge_offsets.len() != nv + 1 || model.edge_mass.len() != model.surface_edges.len()
        {
            return Err(JelloError::Invalid(format!(
                "surface edge rows: {} offsets and {} masses for {nv} vertices and {} edges",
                model.edge_offsets.len(),
                model.edge_mass.len(),
                model.surface_edges.len()
            )));
        }
        let mut vedges: Vec<u32> = model
            .edge_offsets
            .iter()
            .map(|&o| o + base as u32)
            .collect();
        vedges.extend_from_slice(&model.edge_list);
        let rest = |v: u32| model.mesh.positions[v as usize];
        let mut edges: Vec<[u32; 4]> = model
            .surface_edges
            .iter()
            .zip(&model.edge_mass)
            .map(|(e, &m)| {
                let (a, b) = (rest(e[0]), rest(e[1]));
                let sq: f64 = (0..3).map(|k| (b[k] - a[k]).powi(2)).sum();
                [e[0], e[1], (m as f32).to_bits(), (sq as f32).to_bits()]
            })
            .collect();
        if edges.is_empty() {
            edges.push([0; 4]);
        }
        Ok(SurfaceEdgeCsr { vedges, edges })
    }

    /// No edges at any of `nv` vertices (what a model without boxes uploads: the kernel is then
    /// not dispatched).
    pub fn empty(nv: usize) -> Self {
        SurfaceEdgeCsr {
            vedges: vec![(nv + 1) as u32; nv + 1],
            edges: vec![[0; 4]],
        }
    }
}
