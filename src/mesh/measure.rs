//! Geometric measures of a [`TetMesh`]: volumes, edge lengths, element quality, vertex usage.

use crate::error::{JelloError, Result};
use crate::mesh::TetMesh;

/// The six edges of a tet as corner pairs.
pub const TET_EDGES: [[usize; 2]; 6] = [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]];

fn dist2(a: [f64; 3], b: [f64; 3]) -> f64 {
    (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)
}

impl TetMesh {
    /// Sum of the signed tet volumes, m³.
    pub fn total_volume(&self) -> f64 {
        (0..self.tets.len()).map(|t| self.signed_volume(t)).sum()
    }

    /// Mean length (m) of the tet edges, counting each edge once per tet that has it (0 for a
    /// mesh without tets). This is the length scale the degenerate-tet test uses.
    pub fn mean_edge_length(&self) -> f64 {
        if self.tets.is_empty() {
            return 0.0;
        }
        let mut s = 0.0;
        for t in &self.tets {
            let p = t.map(|i| self.positions[i as usize]);
            for [a, b] in TET_EDGES {
                s += dist2(p[a], p[b]).sqrt();
            }
        }
        s / (6 * self.tets.len()) as f64
    }

    /// Shortest and longest tet edge, m (`None` without tets).
    pub fn edge_length_range(&self) -> Option<(f64, f64)> {
        let mut lo = f64::INFINITY;
        let mut hi = 0.0f64;
        for t in &self.tets {
            let p = t.map(|i| self.positions[i as usize]);
            for [a, b] in TET_EDGES {
                let l = dist2(p[a], p[b]).sqrt();
                lo = lo.min(l);
                hi = hi.max(l);
            }
        }
        (!self.tets.is_empty()).then_some((lo, hi))
    }

    /// Normalised mean-ratio quality of tet `t`: `12 (3|V|)^(2/3) / Σ ℓ²` over the six edges.
    /// 1 for the regular tetrahedron, → 0 as the tet flattens; negative for inverted tets
    /// (sign of the volume kept).
    pub fn tet_quality(&self, t: usize) -> f64 {
        let v = self.signed_volume(t);
        let p = self.tets[t].map(|i| self.positions[i as usize]);
        let l2: f64 = TET_EDGES.iter().map(|&[a, b]| dist2(p[a], p[b])).sum();
        if l2 == 0.0 {
            return 0.0;
        }
        v.signum() * 12.0 * (3.0 * v.abs()).powf(2.0 / 3.0) / l2
    }

    /// Checks a mesh built in code (the readers already guarantee all of this): tet indices in
    /// range, finite coordinates, every tet positively oriented and not degenerate (same
    /// threshold as the readers, [`crate::mesh::DEGENERATE_REL_VOLUME`]), at least one tet.
    pub fn validate(&self) -> Result<()> {
        if self.tets.is_empty() {
            return Err(JelloError::Invalid("mesh has no tetrahedra".into()));
        }
        if let Some(i) = self
            .positions
            .iter()
            .position(|p| p.iter().any(|x| !x.is_finite()))
        {
            return Err(JelloError::Invalid(format!(
                "vertex {i} has a non-finite coordinate {:?}",
                self.positions[i]
            )));
        }
        let n = self.positions.len();
        if let Some(t) = self
            .tets
            .iter()
            .position(|t| t.iter().any(|&v| v as usize >= n))
        {
            return Err(JelloError::Invalid(format!(
                "tet {t} {:?} has a vertex index out of range ({n} vertices)",
                self.tets[t]
            )));
        }
        let h = self.mean_edge_length();
        let tol = crate::mesh::DEGENERATE_REL_VOLUME * h * h * h;
        for t in 0..self.tets.len() {
            let v = self.signed_volume(t);
            if v <= tol {
                return Err(JelloError::Invalid(format!(
                    "tet {t} {:?} is inverted or degenerate (volume {v:.3e} m³)",
                    self.tets[t]
                )));
            }
        }
        Ok(())
    }

    /// Vertices that no tet uses, ascending.
    pub fn unreferenced_vertices(&self) -> Vec<u32> {
        let mut used = vec![false; self.positions.len()];
        for t in &self.tets {
            for &v in t {
                if let Some(u) = used.get_mut(v as usize) {
                    *u = true;
                }
            }
        }
        (0..self.positions.len() as u32)
            .filter(|&v| !used[v as usize])
            .collect()
    }

    /// Drops vertices no tet uses, renumbering the rest in their original order. Returns the map
    /// old index → new index (`None` for dropped vertices).
    pub fn remove_unreferenced(&mut self) -> Vec<Option<u32>> {
        let mut used = vec![false; self.positions.len()];
        for t in &self.tets {
            for &v in t {
                used[v as usize] = true;
            }
        }
        let mut map = vec![None; self.positions.len()];
        let mut next = 0u32;
        let mut kept = Vec::with_capacity(self.positions.len());
        for (i, p) in self.positions.iter().enumerate() {
            if used[i] {
                map[i] = Some(next);
                next += 1;
                kept.push(*p);
            }
        }
        self.positions = kept;
        for t in &mut self.tets {
            for v in t.iter_mut() {
                // Every tet vertex is used, so it has a new index.
                *v = map[*v as usize].unwrap_or(0);
            }
        }
        map
    }
}
