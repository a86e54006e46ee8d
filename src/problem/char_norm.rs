//! The characteristic gradient norm used to stop every solver (DOT paper Eq. 15, defined as its
//! public code does so iteration counts compare):
//!
//! converged when ‖∇E_free‖ < ε · ‖C‖_F · ‖ℓ‖ · √(n_free / n),
//!
//! with E scaled as in [`super::StepProblem`] (inertia divided by h², so no h² factor), C the 9×9
//! rest elasticity tensor ∂²Ψ/∂F² at F = I (unprojected), ℓ_v the sum over the tets incident to
//! vertex v of the rest area of the face opposite v, and ∇E over free DOFs only.
//!
//! Heterogeneous bodies: each vertex's force is measured against the material around it,
//! `g_v / c_v` with `c_v = Σ_{e∋v} ‖C_e‖_F A_{e,v} / Σ_{e∋v} A_{e,v}` (the area-weighted
//! `‖C‖_F` of its elements), so the residual is `‖(g_v/c_v)_v‖ / (‖ℓ‖ √(n_free/n))`. For a
//! homogeneous model `c_v = ‖C‖_F` everywhere and this is exactly the DOT norm. Scaling the
//! whole gradient by one global scale instead would let a stiff part hide a soft one: in
//! `stiff_soft.toml` (1e7 and 1e4 Pa halves) the soft half's sag under gravity is ~1e-6 of the
//! stiff scale, so every step "converged" at the rest state and the bar hung motionless.

use crate::material::{rest_tensor, ElementRest, Material};
use crate::mesh::TetMesh;

/// Precomputed scale of the characteristic norm.
#[derive(Clone, Debug, PartialEq)]
pub struct CharacteristicNorm {
    /// ‖ℓ‖ · √(n_free / n), m² (areas): the residual is ‖(g_v/c_v)_v‖ / `scale`.
    pub scale: f64,
    /// `1/c_v` per vertex, 1/Pa (0 for vertices in no element).
    pub inv_c: Vec<f64>,
    /// Number of free vertices.
    pub n_free: usize,
}

impl CharacteristicNorm {
    /// Computes the scale from the rest mesh.
    pub fn new(
        mesh: &TetMesh,
        rest: &[ElementRest<f64>],
        materials: &[Material],
        pinned: &[bool],
    ) -> Self {
        let n = mesh.num_vertices();
        let mut ell = vec![0.0f64; n];
        let mut weighted = vec![0.0f64; n];
        let mut cache: Vec<(Material, f64)> = Vec::new();
        for (t, tet) in mesh.tets.iter().enumerate() {
            let m = materials[t];
            let c = match cache.iter().find(|(k, _)| *k == m) {
                Some((_, c)) => *c,
                None => {
                    let c = rest_tensor(&m).norm();
                    cache.push((m, c));
                    c
                }
            };
            // Area of the face opposite local vertex a = |∇N_a| · 3V (since ∇N_a = −n A / (3V)).
            let g = rest[t].shape_gradients();
            for a in 0..4 {
                let area = g[a].norm() * 3.0 * rest[t].volume;
                ell[tet[a] as usize] += area;
                weighted[tet[a] as usize] += c * area;
            }
        }
        let n_free = pinned.iter().filter(|&&p| !p).count();
        let norm = ell.iter().map(|v| v * v).sum::<f64>().sqrt();
        CharacteristicNorm {
            scale: norm * ((n_free as f64) / (n.max(1) as f64)).sqrt(),
            inv_c: ell
                .iter()
                .zip(&weighted)
                .map(|(&l, &w)| if w > 0.0 { l / w } else { 0.0 })
                .collect(),
            n_free,
        }
    }

    /// The residual ‖(g_v/c_v)_v‖ / scale (compare with ε, default 1e-5). `g` (3n, N) must
    /// already be zero on pinned DOFs.
    pub fn residual(&self, g: &[f64]) -> f64 {
        let norm = g
            .chunks(3)
            .zip(&self.inv_c)
            .map(|(v, w)| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) * w * w)
            .sum::<f64>()
            .sqrt();
        if self.scale > 0.0 {
            norm / self.scale
        } else {
            norm
        }
    }
}
