//! Stiffness-weighted heat-method geodesic distance (Crane et al. 2013, extended as in the
//! SMS paper §3.6.1 with a per-tet diffusion coefficient).
//!
//! 1. Heat step: `(M + t L_k) u = δ_s` — one backward-Euler step of `∂u/∂t = ∇·(k ∇u)`, with
//!    `M` the lumped vertex volumes, `L_k` the P1 Laplacian whose tet `e` is scaled by the
//!    metric stiffness `k_e`, and `t = h²` (`h` the mean edge length, Crane's choice).
//! 2. Direction: `X_e = −∇u / (|∇u| √k_e)` per tet. For isotropic diffusion with coefficient
//!    `k`, short-time heat encodes the distance of the metric `g = I / k` (length element
//!    `ds / √k`); its gradient is parallel to the Euclidean one, with norm `1/√k`.
//! 3. Poisson step: `L φ = ∇·X` with the *unweighted* Laplacian (least-squares fit of
//!    `∇φ ≈ X`), one vertex per mesh component pinned to make it definite; `φ` is then
//!    shifted so that its minimum over the source's component is 0. Vertices in other
//!    components get `+∞`.
//!
//! Both matrices are factored once (sparse Cholesky, AMD) and each distance field costs two
//! back-solves. Units: with `k ≡ 1` the distance is in metres; in general it is metres /
//! √(metric stiffness), the metric stiffness being dimensionless (see [`metric_stiffness`]).

use std::sync::Arc;

use super::mesh::{self, TetGeom};
use crate::cholesky::{Ordering, SparseCholesky};
use crate::sparse::{SymSparse, SymmetricPattern};
use crate::{PrecomputeError, Result};

/// Two materials count as the same when their moduli differ by less than this (relative).
const SAME_MATERIAL_RTOL: f64 = 1e-9;

/// Per-tet metric stiffness of the geodesic (dimensionless): `E_e / E_softest`, except in
/// tets touching a material interface (a vertex whose incident tets do not all share one
/// modulus), where it is reset to `jump_factor` (`c`, paper: 0.1–0.5), i.e.
/// `c·E_softest / E_softest` — the paper's jump penalty (option c): it slows heat across
/// interfaces so clusters do not straddle them.
pub fn metric_stiffness(
    tets: &[[u32; 4]],
    youngs: &[f64],
    n_vertices: usize,
    jump_factor: f64,
) -> Vec<f64> {
    let e_min = youngs.iter().copied().fold(f64::INFINITY, f64::min);
    let mut lo = vec![f64::INFINITY; n_vertices];
    let mut hi = vec![0.0f64; n_vertices];
    for (tet, &e) in tets.iter().zip(youngs) {
        for &v in tet {
            lo[v as usize] = lo[v as usize].min(e);
            hi[v as usize] = hi[v as usize].max(e);
        }
    }
    let interface = |v: u32| hi[v as usize] - lo[v as usize] > SAME_MATERIAL_RTOL * hi[v as usize];
    tets.iter()
        .zip(youngs)
        .map(|(tet, &e)| {
            if tet.iter().any(|&v| interface(v)) {
                jump_factor
            } else {
                e / e_min
            }
        })
        .collect()
}

/// Assembles `Σ_e w_e vol_e ∇λ_a·∇λ_b` on `pattern` (vertex DOFs).
pub(crate) fn weighted_laplacian(
    pattern: &Arc<SymmetricPattern>,
    tets: &[[u32; 4]],
    geom: &TetGeom,
    w: &[f64],
) -> SymSparse {
    let mut a = SymSparse::zeros(pattern.clone());
    for (t, tet) in tets.iter().enumerate() {
        let g = &geom.grad[t];
        let s = w[t] * geom.vol[t];
        for i in 0..4 {
            for j in i..4 {
                let (r, c) = (tet[i] as usize, tet[j] as usize);
                // Off-diagonal pairs appear once per (i, j) with i < j; that fills one
                // triangle of the symmetric matrix exactly once.
                if let Some(k) = pattern.find(r, c) {
                    a.values_mut()[k] += s * mesh::dot(g[i], g[j]);
                }
            }
        }
    }
    a
}

/// Prefactored heat-method distance on one mesh.
pub struct HeatGeodesic {
    heat: SparseCholesky,
    poisson: SparseCholesky,
    tets: Vec<[u32; 4]>,
    vol: Vec<f64>,
    grad: Vec<[[f64; 3]; 4]>,
    inv_sqrt_k: Vec<f64>,
    component: Vec<u32>,
    pinned_root: Vec<bool>,
}

impl std::fmt::Debug for HeatGeodesic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeatGeodesic")
            .field("n", &self.component.len())
            .finish()
    }
}

impl HeatGeodesic {
    /// Factors the heat and Poisson matrices. `k` is the per-tet metric stiffness
    /// (dimensionless, > 0; see [`metric_stiffness`]).
    pub fn new(x: &[[f64; 3]], tets: &[[u32; 4]], k: &[f64]) -> Result<Self> {
        if k.len() != tets.len() || k.iter().any(|&v| !(v.is_finite() && v > 0.0)) {
            return Err(PrecomputeError::Invalid(
                "heat geodesic: `k` needs one positive finite value per tet".into(),
            ));
        }
        let youngs = vec![1.0; tets.len()];
        mesh::validate(x, tets, &youngs, &vec![false; x.len()])?;
        let geom = mesh::geometry(x, tets)?;
        Self::with_geometry(x, tets, &geom, k)
    }

    pub(crate) fn with_geometry(
        x: &[[f64; 3]],
        tets: &[[u32; 4]],
        geom: &TetGeom,
        k: &[f64],
    ) -> Result<Self> {
        let n = x.len();
        let pattern = Arc::new(SymmetricPattern::from_elements(n, 1, tets)?);
        let adj = mesh::vertex_adjacency(n, tets);
        let (component, n_comp) = mesh::components(&adj, |_| true);
        // Mean edge length → diffusion time t = h².
        let (mut sum, mut cnt) = (0.0, 0usize);
        for (v, nb) in adj.iter().enumerate() {
            for &w in nb {
                if (w as usize) > v {
                    sum += mesh::norm(mesh::sub(x[v], x[w as usize]));
                    cnt += 1;
                }
            }
        }
        let h = sum / cnt.max(1) as f64;
        let mut heat = weighted_laplacian(&pattern, tets, geom, k);
        for v in heat.values_mut() {
            *v *= h * h;
        }
        heat.add_diagonal(&geom.vertex_vol);
        let ones = vec![1.0; tets.len()];
        let mut poisson = weighted_laplacian(&pattern, tets, geom, &ones);
        let mut pinned_root = vec![false; n];
        let mut seen = vec![false; n_comp];
        for v in 0..n {
            let c = component[v] as usize;
            if !seen[c] {
                seen[c] = true;
                pinned_root[v] = true;
            }
        }
        poisson.set_identity_rows(&pinned_root);
        Ok(Self {
            heat: SparseCholesky::new(&heat, Ordering::Amd)?,
            poisson: SparseCholesky::new(&poisson, Ordering::Amd)?,
            tets: tets.to_vec(),
            vol: geom.vol.clone(),
            grad: geom.grad.clone(),
            inv_sqrt_k: k.iter().map(|v| 1.0 / v.sqrt()).collect(),
            component,
            pinned_root,
        })
    }

    /// Number of vertices.
    pub fn n(&self) -> usize {
        self.component.len()
    }

    /// Distance from vertex `source` to every vertex, written into `out` (length `n`);
    /// `+∞` in other mesh components.
    pub fn distance(&self, source: usize, out: &mut [f64]) -> Result<()> {
        let n = self.n();
        if source >= n || out.len() != n {
            return Err(PrecomputeError::Invalid(format!(
                "heat geodesic: source {source} / output length {} for {n} vertices",
                out.len()
            )));
        }
        let mut u = vec![0.0; n];
        u[source] = 1.0;
        self.heat.solve_in_place(&mut u)?;
        let b = out;
        b.fill(0.0);
        for (t, tet) in self.tets.iter().enumerate() {
            let g = &self.grad[t];
            let mut gu = [0.0; 3];
            for a in 0..4 {
                gu = mesh::add(gu, mesh::scl(g[a], u[tet[a] as usize]));
            }
            let len = mesh::norm(gu);
            if len.is_nan() || len <= 0.0 {
                // Heat underflowed to exactly zero here: no direction information.
                continue;
            }
            let xdir = mesh::scl(gu, -self.inv_sqrt_k[t] / len);
            for a in 0..4 {
                b[tet[a] as usize] += self.vol[t] * mesh::dot(xdir, g[a]);
            }
        }
        for v in 0..n {
            if self.pinned_root[v] {
                b[v] = 0.0;
            }
        }
        self.poisson.solve_in_place(b)?;
        let c = self.component[source];
        let min = (0..n)
            .filter(|&v| self.component[v] == c)
            .map(|v| b[v])
            .fold(f64::INFINITY, f64::min);
        for v in 0..n {
            b[v] = if self.component[v] == c {
                b[v] - min
            } else {
                f64::INFINITY
            };
        }
        Ok(())
    }
}
