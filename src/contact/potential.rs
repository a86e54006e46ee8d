//! IPC's contact potential over a [`CollisionMesh`] (Li et al. 2020, "Incremental Potential
//! Contact"): κ·Σₖ mₖ(x)·b(dₖ(x)) over the point–triangle and edge–edge pairs closer than d̂,
//! with dₖ the pair's squared distance ([`super::distance`]), b the log barrier on squared
//! distances ([`super::barrier`]), mₖ the edge–edge mollifier ([`super::mollifier`]; 1 for
//! point–triangle pairs) and κ the stiffness in J/m⁴.
//!
//! **Which pairs.** Every point–triangle and edge–edge pair of primitives that share no vertex,
//! of bodies that may touch ([`CollisionMesh::bodies_may_touch`]: two objects, an object and a
//! triangle-mesh obstacle, an object with itself when its self-contact is on), whose squared
//! distance is below d̂². The broad phase ([`super::broad`]) finds them in O(n) for a surface of
//! n primitives. As in the paper, a point near a shared edge of two triangles is in two pairs
//! with the same distance (and an edge pair may repeat a point–edge distance): the barrier is
//! still a barrier, only somewhat stiffer near features; IPC keeps these duplicates too.
//!
//! **Derivatives.** Exact: the distances' gradients and Hessians are analytic
//! ([`super::distance`]), composed with b and the mollifier by the chain and product rules.
//! Newton needs a positive semi-definite matrix, so each pair's 12×12 Hessian is projected
//! (eigenvalues clamped at 0) before it is added, as IPC does.
//!
//! **Step filter.** [`IpcContact::max_step`]: additive CCD ([`super::ccd`], η = 0.9) on every
//! pair whose swept boxes overlap along the step; the filtered step keeps every pair at a
//! positive distance, so no iterate intersects and the barrier stays finite.
//!
//! **Reproducibility.** Pairs come sorted from the broad phase; sums over pairs run in fixed
//! chunks and add the chunks in order, so results do not depend on the thread count.

use super::barrier::{barrier, pair_barrier, stiffness_bounds, StiffnessBounds};
use super::broad::candidates;
use super::ccd::{additive_ccd, AccdParams, PairKind};
use super::distance::{
    edge_edge, edge_edge_type, point_triangle, point_triangle_type, SecondOrder,
};
use super::mesh::CollisionMesh;
use super::mollifier::{edge_edge_mollifier, mollified, mollifier, mollifier_threshold};
use crate::error::{JelloError, Result};
use nalgebra::{SMatrix, SymmetricEigen, Vector3};
use rayon::prelude::*;

type V3 = Vector3<f64>;

/// Pairs per chunk of a deterministic parallel sum.
const CHUNK: usize = 1024;

/// A model's IPC contact: its collision mesh and barrier settings.
#[derive(Clone, Debug)]
pub struct IpcContact {
    /// The surfaces (and triangle-mesh obstacles) that touch.
    pub mesh: CollisionMesh,
    /// Activation distance d̂, m: pairs closer than this feel the barrier.
    pub dhat: f64,
    /// Diagonal of the rest collision mesh's bounding box, m: the length scale of κ's bounds
    /// and of the gap below which κ is raised ([`super::barrier`]).
    pub bbox_diagonal: f64,
    /// A fixed stiffness κ (J/m⁴) instead of IPC's adaptive one.
    pub kappa: Option<f64>,
    /// Lagged friction between the pairs (`None`: frictionless; [`super::friction`]).
    pub friction: Option<super::friction::FrictionParams>,
    /// The script of each obstacle body, in the order of the obstacle bodies in `mesh.bodies`
    /// ([`crate::problem::Script::Fixed`] for a static one; see [`super::obstacles`]).
    pub obstacle_scripts: Vec<crate::problem::Script>,
}

/// One contact pair: a stencil of four global vertex ids ([`CollisionMesh`] indexing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContactPair {
    /// Point–triangle or edge–edge.
    pub kind: PairKind,
    /// Point–triangle: `[p, t₀, t₁, t₂]`; edge–edge: `[a₀, a₁, b₀, b₁]`.
    pub ids: [u32; 4],
    /// Edge–edge: the mollifier threshold ε× (m⁴) from the rest lengths; 0 for point–triangle.
    pub eps_x: f64,
}

impl IpcContact {
    /// Contact over `mesh` at the model's rest positions `x` (flat, m) with activation distance
    /// `dhat` (m, finite and > 0) and an optional fixed stiffness `kappa` (J/m⁴, finite and
    /// > 0). Errors name the offending key.
    pub fn new(mesh: CollisionMesh, x: &[f64], dhat: f64, kappa: Option<f64>) -> Result<Self> {
        if !(dhat.is_finite() && dhat > 0.0) {
            return Err(JelloError::Invalid(format!(
                "contact.dhat: the activation distance must be finite and > 0 m, got {dhat}"
            )));
        }
        if let Some(k) = kappa {
            if !(k.is_finite() && k > 0.0) {
                return Err(JelloError::Invalid(format!(
                    "contact.ipc_kappa: the stiffness must be finite and > 0 J/m⁴, got {k}"
                )));
            }
        }
        let mut out = IpcContact {
            mesh,
            dhat,
            bbox_diagonal: 0.0,
            kappa,
            friction: None,
            obstacle_scripts: Vec::new(),
        };
        let obstacles = out
            .mesh
            .bodies
            .iter()
            .filter(|b| b.kind == super::mesh::BodyKind::Obstacle)
            .count();
        out.obstacle_scripts = vec![crate::problem::Script::Fixed; obstacles];
        let xs = out.positions(x);
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for &v in &out.mesh.vertices {
            let p = xs[v as usize];
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let d = (0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>().sqrt();
        out.bbox_diagonal = if d.is_finite() { d } else { 0.0 };
        Ok(out)
    }

    /// The collision routines' position array for the model's flat positions `x` (m): the
    /// model's vertices, then the obstacles'.
    pub fn positions<'a>(&self, x: &'a [f64]) -> std::borrow::Cow<'a, [[f64; 3]]> {
        self.mesh.positions(bytemuck::cast_slice(x))
    }

    /// d̂², m².
    pub fn dhat_sq(&self) -> f64 {
        self.dhat * self.dhat
    }

    /// κ's range for a mass scale `inertia` (mean vertex mass × the inertia weight, kg/s²).
    pub fn stiffness_bounds(&self, inertia: f64) -> StiffnessBounds {
        stiffness_bounds(inertia, self.bbox_diagonal, self.dhat_sq())
    }

    /// Every pair whose boxes at `xs` (grown by `inflation/2`, m), swept to `xs + dxs` when given,
    /// overlap (see [`super::broad::candidates`]).
    pub(super) fn candidate_pairs(
        &self,
        xs: &[[f64; 3]],
        dxs: Option<&[[f64; 3]]>,
        inflation: f64,
    ) -> Result<Vec<ContactPair>> {
        let c = candidates(&self.mesh, xs, dxs, inflation)?;
        let m = &self.mesh;
        let mut out = Vec::with_capacity(c.pt.len() + c.ee.len());
        for [v, f] in c.pt {
            let t = m.faces[f as usize];
            out.push(ContactPair {
                kind: PairKind::PointTriangle,
                ids: [m.vertices[v as usize], t[0], t[1], t[2]],
                eps_x: 0.0,
            });
        }
        for [a, b] in c.ee {
            let (a, b) = (a as usize, b as usize);
            let (ea, eb) = (m.edges[a], m.edges[b]);
            out.push(ContactPair {
                kind: PairKind::EdgeEdge,
                ids: [ea[0], ea[1], eb[0], eb[1]],
                eps_x: mollifier_threshold(
                    m.edge_rest_length[a].powi(2),
                    m.edge_rest_length[b].powi(2),
                ),
            });
        }
        Ok(out)
    }

    /// The pairs closer than d̂ at `xs` (positions from [`Self::positions`]), in a deterministic
    /// order.
    pub fn active_pairs(&self, xs: &[[f64; 3]]) -> Result<Vec<ContactPair>> {
        let dsq = self.dhat_sq();
        let pairs = self.candidate_pairs(xs, None, self.dhat)?;
        Ok(pairs
            .into_par_iter()
            .filter(|p| distance_sq(p, xs) < dsq)
            .collect())
    }

    /// Every pair whose boxes at `xs` (positions from [`Self::positions`], m), grown by
    /// (d̂ + `margin`)/2 on every side, overlap: a superset of [`Self::active_pairs`] at every
    /// point where no vertex has moved by more than `margin`/2 from `xs`. Deterministic order.
    pub fn candidates_within(&self, xs: &[[f64; 3]], margin: f64) -> Result<Vec<ContactPair>> {
        self.candidate_pairs(xs, None, self.dhat + margin)
    }

    /// Every pair whose boxes swept from `xs` to `xs + dxs` (positions from
    /// [`Self::positions`] and displacements per collision vertex, m), grown by
    /// (d̂ + `margin`)/2 on every side, overlap: a superset of [`Self::active_pairs`] at every
    /// point where each vertex lies in the box of its own segment [`xs`, `xs + dxs`] grown by
    /// `margin`/2 — a primitive then lies in its swept box grown by `margin`/2, and two such
    /// boxes of a pair left out are more than d̂ apart. The list of the device step filter's
    /// trust boxes (`ipc_trust`). Deterministic order.
    pub fn candidates_around(
        &self,
        xs: &[[f64; 3]],
        dxs: &[[f64; 3]],
        margin: f64,
    ) -> Result<Vec<ContactPair>> {
        self.candidate_pairs(xs, Some(dxs), self.dhat + margin)
    }

    /// Every pair that may come closer than d̂ somewhere on the straight path from `xs` to
    /// `xs + dxs` (positions from [`Self::positions`], m): the broad phase's boxes grown by d̂/2
    /// and swept over the move, a superset of [`Self::active_pairs`] at every point of the
    /// path — the list a line search along `dxs` can evaluate all its trials on. Deterministic
    /// order.
    pub fn swept_candidates(&self, xs: &[[f64; 3]], dxs: &[[f64; 3]]) -> Result<Vec<ContactPair>> {
        self.candidate_pairs(xs, Some(dxs), self.dhat)
    }

    /// m·b(d) of one pair at κ = 1 (m⁴; +∞ when its distance is 0).
    pub fn pair_value(&self, p: &ContactPair, xs: &[[f64; 3]]) -> f64 {
        let d = distance_sq(p, xs);
        let b = barrier(d, self.dhat_sq()).0;
        match p.kind {
            PairKind::PointTriangle => b,
            PairKind::EdgeEdge => {
                let x = stencil(p, xs);
                let c = (x[1] - x[0]).cross(&(x[3] - x[2])).norm_squared();
                let m = mollifier(c, p.eps_x).0;
                if m == 0.0 && b.is_infinite() {
                    // Parallel edges at zero distance: overlapping, not a finite energy.
                    f64::INFINITY
                } else {
                    m * b
                }
            }
        }
    }

    /// m·b(d) of one pair at κ = 1 with its exact gradient and Hessian over the stencil
    /// (`ids` order, 3 coordinates per vertex). The pair's distance must be positive.
    pub fn pair_derivatives(&self, p: &ContactPair, xs: &[[f64; 3]]) -> SecondOrder<12> {
        let x = stencil(p, xs);
        let dsq = self.dhat_sq();
        match p.kind {
            PairKind::PointTriangle => {
                let ty = point_triangle_type(&x[0], &x[1], &x[2], &x[3]);
                let d = point_triangle(&x[0], &x[1], &x[2], &x[3], ty);
                pair_barrier(&d, dsq, 1.0)
            }
            PairKind::EdgeEdge => {
                let ty = edge_edge_type(&x[0], &x[1], &x[2], &x[3]);
                let d = edge_edge(&x[0], &x[1], &x[2], &x[3], ty);
                let b = pair_barrier(&d, dsq, 1.0);
                let m = edge_edge_mollifier(&x[0], &x[1], &x[2], &x[3], p.eps_x);
                mollified(&m, &b)
            }
        }
    }

    /// Σ m·b over `pairs` at κ = 1 (m⁴; +∞ when a pair touches).
    pub fn energy_unit(&self, pairs: &[ContactPair], xs: &[[f64; 3]]) -> f64 {
        let parts: Vec<f64> = pairs
            .par_chunks(CHUNK)
            .map(|c| c.iter().map(|p| self.pair_value(p, xs)).sum::<f64>())
            .collect();
        parts.iter().sum()
    }

    /// Adds κ·∇(Σ m·b) over `pairs` to the flat gradient `g` (N; model vertices only — obstacle
    /// vertices have no degrees of freedom) and returns Σ m·b at κ = 1 (m⁴).
    pub fn add_gradient(
        &self,
        pairs: &[ContactPair],
        xs: &[[f64; 3]],
        kappa: f64,
        g: &mut [f64],
    ) -> f64 {
        let terms: Vec<(f64, [f64; 12])> = pairs
            .par_iter()
            .map(|p| {
                let d = self.pair_derivatives(p, xs);
                let mut gr = [0.0; 12];
                gr.copy_from_slice(d.grad.as_slice());
                (d.value, gr)
            })
            .collect();
        let n = self.mesh.num_model_vertices;
        let mut e = 0.0;
        for (chunk_pairs, chunk) in pairs.chunks(CHUNK).zip(terms.chunks(CHUNK)) {
            let mut part = 0.0;
            for (p, (v, gr)) in chunk_pairs.iter().zip(chunk) {
                part += v;
                for (k, &id) in p.ids.iter().enumerate() {
                    let id = id as usize;
                    if id < n {
                        for c in 0..3 {
                            g[3 * id + c] += kappa * gr[3 * k + c];
                        }
                    }
                }
            }
            e += part;
        }
        e
    }

    /// Each pair's Hessian κ·∇²(m·b), projected to positive semi-definite, with its stencil:
    /// what Newton needs.
    pub fn hessian_blocks(
        &self,
        pairs: &[ContactPair],
        xs: &[[f64; 3]],
        kappa: f64,
    ) -> Vec<([u32; 4], SMatrix<f64, 12, 12>)> {
        self.pair_hessians(pairs, xs, kappa, true)
    }

    /// Each pair's exact Hessian κ·∇²(m·b), not projected, with its stencil: what the adjoint
    /// of a converged step needs ([`crate::adjoint`]; a projected block is a different matrix
    /// wherever the pair's Hessian is indefinite, e.g. b'·∇²d of a concave distance).
    pub fn exact_hessian_blocks(
        &self,
        pairs: &[ContactPair],
        xs: &[[f64; 3]],
        kappa: f64,
    ) -> Vec<([u32; 4], SMatrix<f64, 12, 12>)> {
        self.pair_hessians(pairs, xs, kappa, false)
    }

    /// κ·∇²(m·b) per pair, PSD-projected when `project`.
    fn pair_hessians(
        &self,
        pairs: &[ContactPair],
        xs: &[[f64; 3]],
        kappa: f64,
        project: bool,
    ) -> Vec<([u32; 4], SMatrix<f64, 12, 12>)> {
        pairs
            .par_iter()
            .map(|p| {
                let h = self.pair_derivatives(p, xs).hess * kappa;
                (p.ids, if project { project_psd(&h) } else { h })
            })
            .collect()
    }

    /// The smallest squared distance over `pairs` (m²; +∞ for none).
    pub fn min_distance_sq(&self, pairs: &[ContactPair], xs: &[[f64; 3]]) -> f64 {
        pairs
            .par_iter()
            .map(|p| distance_sq(p, xs))
            .reduce(|| f64::INFINITY, f64::min)
    }

    /// The largest α ≤ `limit` such that no pair comes into contact along `x + α·dx` (flat model
    /// positions and displacements, m; obstacle vertices still at their positions at t = 0):
    /// [`Self::max_step_at`] over [`Self::positions`].
    pub fn max_step(&self, x: &[f64], dx: &[f64], limit: f64) -> Result<f64> {
        self.max_step_at(&self.positions(x), dx, limit)
    }

    /// The largest α ≤ `limit` such that no pair comes into contact along `xs + α·dx` (`xs` the
    /// full position array, m, obstacles where the step has them; `dx` the flat model
    /// displacements, m; obstacle vertices still): additive CCD on every pair whose boxes swept
    /// over `[xs, xs + limit·dx]` overlap. 0 when a pair already touches.
    pub fn max_step_at(&self, xs: &[[f64; 3]], dx: &[f64], limit: f64) -> Result<f64> {
        if limit <= 0.0 {
            return Ok(0.0);
        }
        let scaled: Vec<f64> = dx.iter().map(|d| d * limit).collect();
        // Obstacle vertices (after the model's) do not move.
        let mut ds: Vec<[f64; 3]> = bytemuck::cast_slice(&scaled).to_vec();
        ds.resize(self.mesh.num_vertices(), [0.0; 3]);
        let pairs = self.candidate_pairs(xs, Some(&ds), 0.0)?;
        Ok(limit * self.max_step_on(&pairs, xs, &scaled))
    }

    /// [`Self::max_step_at`] with `limit` 1 over a given candidate list `pairs` (a superset of
    /// the pairs whose boxes swept over the move overlap, e.g. [`Self::swept_candidates`]).
    pub fn max_step_on(&self, pairs: &[ContactPair], xs: &[[f64; 3]], dx: &[f64]) -> f64 {
        self.times_of_impact(pairs, xs, dx)
            .into_iter()
            .fold(1.0, |t, (_, ti)| t.min(ti))
    }

    /// Per model vertex, the largest α ≤ 1 such that no pair of `pairs` it belongs to comes
    /// into contact along `xs + α·dx` with the pair's vertices moving together (`pairs` a
    /// superset of the pairs whose boxes swept over `[xs, xs + dx]` overlap, e.g.
    /// [`Self::swept_candidates`]; `xs` the full position array, m; `dx` flat model
    /// displacements, m; obstacle vertices still): each pair's time of impact given to its
    /// model vertices. The per-vertex step filter of the vertex solvers: a vertex far from every
    /// contact keeps its whole step while one about to touch is held back alone. Scaling each
    /// vertex's move by its own bound is not itself a straight joint path, so callers check the
    /// scaled move with [`Self::max_step_on`].
    pub fn vertex_step_bounds(
        &self,
        pairs: &[ContactPair],
        xs: &[[f64; 3]],
        dx: &[f64],
    ) -> Vec<f64> {
        let n = self.mesh.num_model_vertices;
        let mut out = vec![1.0f64; n];
        for (ids, t) in self.times_of_impact(pairs, xs, dx) {
            for v in ids {
                if (v as usize) < n {
                    out[v as usize] = out[v as usize].min(t);
                }
            }
        }
        out
    }

    /// Additive CCD's time of impact (< 1) of every pair of `pairs` with a moving model vertex
    /// along `xs + t·dx`, t ∈ [0, 1] (`dx` flat model displacements; obstacle vertices still).
    fn times_of_impact(
        &self,
        pairs: &[ContactPair],
        xs: &[[f64; 3]],
        dx: &[f64],
    ) -> Vec<([u32; 4], f64)> {
        let n = self.mesh.num_model_vertices;
        let at = |v: u32| {
            let v = v as usize;
            if v < n {
                V3::new(dx[3 * v], dx[3 * v + 1], dx[3 * v + 2])
            } else {
                V3::zeros()
            }
        };
        let params = AccdParams::default();
        pairs
            .par_iter()
            .filter(|p| p.ids.iter().any(|&v| at(v) != V3::zeros()))
            .map(|p| {
                let start = stencil(p, xs);
                let end = [0, 1, 2, 3].map(|k| start[k] + at(p.ids[k]));
                (
                    p.ids,
                    additive_ccd(p.kind, &start, &end, 0.0, 1.0, &params).t,
                )
            })
            .filter(|(_, t)| *t < 1.0)
            .collect()
    }
}

/// The pair's four corners.
fn stencil(p: &ContactPair, xs: &[[f64; 3]]) -> [V3; 4] {
    p.ids.map(|v| {
        let q = xs[v as usize];
        V3::new(q[0], q[1], q[2])
    })
}

/// The pair's squared distance, m².
pub fn distance_sq(p: &ContactPair, xs: &[[f64; 3]]) -> f64 {
    p.kind.distance_sq(&stencil(p, xs))
}

/// `m` with its negative eigenvalues set to 0 (symmetric input).
fn project_psd(m: &SMatrix<f64, 12, 12>) -> SMatrix<f64, 12, 12> {
    let eig = SymmetricEigen::new(*m);
    if eig.eigenvalues.iter().all(|&l| l >= 0.0) {
        return *m;
    }
    let mut out = SMatrix::<f64, 12, 12>::zeros();
    for (k, &l) in eig.eigenvalues.iter().enumerate() {
        if l > 0.0 {
            let v = eig.eigenvectors.column(k);
            out += v * v.transpose() * l;
        }
    }
    out
}
