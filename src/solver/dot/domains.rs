//! DOT's initial inverse Hessian D₁ = B Sᵀ diag(H₁⁻¹ … H_s⁻¹) S (Li et al. 2019, Eq. 10–13).

use super::params::{DotParams, Gather};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::problem::{ElasticTerms, HessianLayout, Model, StepProblem};
use crate::solver::backend::PotentialBackend;
use crate::solver::lbfgs::{InitialInverse, Refresh};
use crate::solver::pd::ContactTerm;
use crate::solver::report::ms;
use faer::Par;
use jello_precompute::cholesky::SparseCholesky;
use jello_precompute::partition::Decomposition;
use jello_precompute::sparse::{SymSparse, SymmetricPattern};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;
use std::sync::Arc;

/// One subdomain: its DOFs, the principal submatrix of the global Hessian over them, its
/// factor and a right-hand side buffer.
struct Subdomain {
    /// Global DOF of each local DOF (3 per vertex of V_j, ascending).
    dofs: Vec<u32>,
    /// Per stored local entry: its index in the global Hessian's value array.
    source: Vec<u32>,
    matrix: SymSparse,
    factor: SparseCholesky,
    rhs: Vec<f64>,
}

/// Per-phase times and counts of [`DomainInverse`] over its life.
#[derive(Clone, Copy, Debug, Default)]
pub struct DomainStats {
    /// Global projected Hessian at x_start (element Hessians and assembly), ms.
    pub hessian_ms: f64,
    /// Subdomain extraction and numeric factorisations, ms.
    pub factor_ms: f64,
    /// D₁ applications (scatter, back-solves, gather), ms.
    pub solve_ms: f64,
    /// dᵀH(x_start)d products, ms (on a device the time to record the pass; it runs with the
    /// read that follows).
    pub curvature_ms: f64,
    /// Steps prepared.
    pub steps: usize,
    /// D₁ applications.
    pub applications: usize,
    /// Factorisations that needed a diagonal shift (round-off lost definiteness).
    pub shifted: usize,
    /// Subdomain refactorisations within steps for vertices that came into contact
    /// (see the module docs of [`crate::solver::dot`]).
    pub contact_refactors: usize,
}

/// D₁ for one model and decomposition: symbolic analyses once, numeric factors per step.
pub struct DomainInverse {
    name: String,
    params: DotParams,
    layout: HessianLayout,
    global: SymSparse,
    subs: Vec<Subdomain>,
    /// Per DOF: 1/n_v (the averaging weight B).
    weight: Vec<f64>,
    /// DOFs of no subdomain (vertices of no element): D₁ is 1/diag there.
    loose: Vec<u32>,
    gather: Gather,
    decomposition: Arc<Decomposition>,
    stats: DomainStats,
    scratch: Vec<f64>,
    /// The backend's element Hessians at x_start, packed for the block gather.
    packed: Vec<crate::problem::PackedTetHessian>,
    /// Per-vertex barrier curvature blocks at x_start (already in H(x_start)), by vertex.
    start_blocks: Vec<(u32, Matrix3<f64>)>,
    /// The blocks the factors carry now (by vertex): H_j = H(x_start) restricted to V_j
    /// − start blocks + these.
    folded: Vec<(u32, Matrix3<f64>)>,
    terms: Vec<ContactTerm>,
}

impl DomainInverse {
    /// Subdomain patterns and symbolic factorisations for `model` split by `decomposition`;
    /// `name` is what the solver reports ("dot", "lbfgs-h").
    pub fn new(
        model: &Model,
        decomposition: Arc<Decomposition>,
        params: DotParams,
        name: &str,
    ) -> Result<Self> {
        let nv = model.num_vertices();
        if decomposition.copies.len() != nv
            || decomposition.element_part.len() != model.mesh.num_tets()
        {
            return Err(JelloError::Solver(
                "dot: the decomposition was built for another mesh".into(),
            ));
        }
        let layout = HessianLayout::new(model)?;
        let global = layout.zeros();
        let pattern = layout.pattern.clone();
        let err = |e: jello_precompute::PrecomputeError| JelloError::Solver(format!("dot: {e}"));
        let subs = decomposition
            .vertices
            .par_iter()
            .map(|verts| {
                let dofs: Vec<u32> = verts
                    .iter()
                    .flat_map(|&v| (0..3).map(move |k| 3 * v + k))
                    .collect();
                // Local index of each global DOF in this subdomain (ascending, so upper
                // entries stay upper).
                let mut local = std::collections::HashMap::with_capacity(dofs.len());
                for (i, &g) in dofs.iter().enumerate() {
                    local.insert(g as usize, i);
                }
                let mut entries = Vec::new();
                for (c, &gc) in dofs.iter().enumerate() {
                    let gc = gc as usize;
                    let col = pattern.col_ptr()[gc]..pattern.col_ptr()[gc + 1];
                    for &gr in &pattern.row_idx()[col] {
                        if let Some(&r) = local.get(&gr) {
                            entries.push((r, c));
                        }
                    }
                }
                let sub_pattern =
                    Arc::new(SymmetricPattern::from_entries(dofs.len(), entries).map_err(err)?);
                let mut source = Vec::with_capacity(sub_pattern.nnz());
                for c in 0..dofs.len() {
                    let rows = sub_pattern.col_ptr()[c]..sub_pattern.col_ptr()[c + 1];
                    for &r in &sub_pattern.row_idx()[rows] {
                        let k = pattern
                            .find(dofs[r] as usize, dofs[c] as usize)
                            .ok_or_else(|| {
                                JelloError::Solver("dot: subdomain entry not in the Hessian".into())
                            })?;
                        source.push(k as u32);
                    }
                }
                let factor =
                    SparseCholesky::analyze(sub_pattern.clone(), params.ordering).map_err(err)?;
                Ok(Subdomain {
                    rhs: vec![0.0; dofs.len()],
                    matrix: SymSparse::zeros(sub_pattern),
                    dofs,
                    source,
                    factor,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut weight = vec![0.0; 3 * nv];
        let mut loose = Vec::new();
        for (v, &c) in decomposition.copies.iter().enumerate() {
            for k in 0..3 {
                if c == 0 {
                    loose.push((3 * v + k) as u32);
                } else {
                    weight[3 * v + k] = 1.0 / c as f64;
                }
            }
        }
        Ok(DomainInverse {
            name: name.into(),
            params,
            layout,
            global,
            subs,
            weight,
            loose,
            gather: params.gather,
            decomposition,
            stats: DomainStats::default(),
            scratch: vec![0.0; 3 * nv],
            packed: Vec::new(),
            start_blocks: Vec::new(),
            folded: Vec::new(),
            terms: Vec::new(),
        })
    }

    /// The decomposition.
    pub fn decomposition(&self) -> &Decomposition {
        &self.decomposition
    }

    /// Per-phase times and counts.
    pub fn stats(&self) -> DomainStats {
        self.stats
    }

    /// Stored values of every subdomain's Cholesky factor (a measure of memory: 8 bytes
    /// each).
    pub fn factor_nnz(&self) -> usize {
        self.subs.iter().map(|s| s.factor.factor_nnz()).sum()
    }

    /// The global projected Hessian of the last prepared step (for tests).
    pub fn global_hessian(&self) -> &SymSparse {
        &self.global
    }

    /// Subdomain j's matrix H_j of the last prepared step and its global DOFs (for tests).
    pub fn subdomain_matrix(&self, j: usize) -> (&SymSparse, &[u32]) {
        (&self.subs[j].matrix, &self.subs[j].dofs)
    }

    /// Extracts and factors the H_j marked in `which` (all when `None`) from the global
    /// Hessian plus the folded contact terms, in parallel.
    fn factor_some(&mut self, which: Option<&[bool]>) -> Result<()> {
        let global = self.global.values();
        let par = if self.subs.len() == 1 {
            faer::get_global_parallelism()
        } else {
            Par::Seq
        };
        let delta = block_difference(&self.folded, &self.start_blocks);
        let verts = &self.decomposition.vertices;
        let shifted = self
            .subs
            .par_iter_mut()
            .enumerate()
            .filter(|(j, _)| which.is_none_or(|w| w[*j]))
            .map(|(j, s)| {
                for (dst, &k) in s.matrix.values_mut().iter_mut().zip(&s.source) {
                    *dst = global[k as usize];
                }
                for (v, b) in &delta {
                    if let Ok(lv) = verts[j].binary_search(v) {
                        add_block(&mut s.matrix, 3 * lv, b);
                    }
                }
                refactor_shifted(&mut s.factor, &mut s.matrix, par)
            })
            .collect::<Result<Vec<bool>>>()?;
        self.stats.shifted += shifted.iter().filter(|&&s| s).count();
        Ok(())
    }
}

/// Adds `b` to the 3 × 3 diagonal block at local DOF `d0` (upper triangle).
fn add_block(m: &mut SymSparse, d0: usize, b: &Matrix3<f64>) {
    for i in 0..3 {
        for j in i..3 {
            if let Some(k) = m.pattern().find(d0 + i, d0 + j) {
                m.values_mut()[k] += b[(i, j)];
            }
        }
    }
}

/// Σ β n nᵀ per vertex of `terms`, sorted by vertex.
fn blocks(terms: &[ContactTerm]) -> Vec<(u32, Matrix3<f64>)> {
    let mut out: Vec<(u32, Matrix3<f64>)> = Vec::new();
    let mut sorted: Vec<&ContactTerm> = terms.iter().collect();
    sorted.sort_by_key(|t| t.vertex);
    for t in sorted {
        let n = Vector3::from(t.normal);
        let b = n * n.transpose() * t.beta;
        match out.last_mut() {
            Some((v, acc)) if *v == t.vertex => *acc += b,
            _ => out.push((t.vertex, b)),
        }
    }
    out
}

/// `a − b` per vertex (both sorted by vertex), the vertices of either.
fn block_difference(
    a: &[(u32, Matrix3<f64>)],
    b: &[(u32, Matrix3<f64>)],
) -> Vec<(u32, Matrix3<f64>)> {
    let mut out: Vec<(u32, Matrix3<f64>)> = a.to_vec();
    for (v, m) in b {
        match out.binary_search_by_key(v, |e| e.0) {
            Ok(i) => out[i].1 -= m,
            Err(i) => out.insert(i, (*v, -m)),
        }
    }
    out.retain(|(_, m)| m.abs().max() > 0.0);
    out
}

/// Whether the factors' contact blocks `old` no longer describe `new`: another vertex set,
/// or a block whose size changed tenfold.
fn stale(old: &[(u32, Matrix3<f64>)], new: &[(u32, Matrix3<f64>)]) -> bool {
    old.len() != new.len()
        || old.iter().zip(new).any(|((va, a), (vb, b))| {
            let (na, nb) = (a.norm(), b.norm());
            va != vb || nb > 10.0 * na || nb < 0.1 * na
        })
}

/// Numeric factorisation; if round-off made H_j lose definiteness (a PSD-projected Hessian
/// with a tiny mass term), retry with a growing diagonal shift. Returns whether it shifted.
fn refactor_shifted(f: &mut SparseCholesky, m: &mut SymSparse, par: Par) -> Result<bool> {
    if f.refactor_with(m, par).is_ok() {
        return Ok(false);
    }
    let n = m.n();
    let diag: Vec<usize> = (0..n).filter_map(|d| m.pattern().find(d, d)).collect();
    let mean = diag.iter().map(|&k| m.values()[k].abs()).sum::<f64>() / n.max(1) as f64;
    let mut shift = 1e-8 * mean.max(1e-300);
    for _ in 0..12 {
        for &k in &diag {
            m.values_mut()[k] += shift;
        }
        if f.refactor_with(m, par).is_ok() {
            return Ok(true);
        }
        shift *= 10.0;
    }
    Err(JelloError::Solver(
        "dot: a subdomain Hessian is not positive definite even after shifting".into(),
    ))
}

impl<B: PotentialBackend> InitialInverse<B> for DomainInverse {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// H_j at x_start: the global projected Hessian there (element Hessians from the
    /// backend — on a device its `elastic` kernel computes and filters them — assembled here),
    /// each subdomain's principal submatrix over its vertices (interface blocks included:
    /// Eq. 9's K_j), factored in parallel.
    fn begin_step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        backend: &mut B,
    ) -> Result<bool> {
        let t0 = Instant::now();
        let elem = backend.start_element_hessians(problem, elastic, self.params.filter)?;
        crate::problem::pack_element_hessians(&problem.model.mesh.tets, elem, &mut self.packed);
        problem.assemble(
            &self.layout,
            &self.packed,
            &problem.x_start,
            &mut self.global,
        );
        self.start_blocks.clear();
        if !problem.model.obstacles.is_empty() {
            crate::solver::pd::contact_terms(problem, &problem.x_start, &mut self.terms);
            self.start_blocks = blocks(&self.terms);
        }
        self.folded.clone_from(&self.start_blocks);
        self.stats.hessian_ms += ms(t0);
        let t0 = Instant::now();
        self.factor_some(None)?;
        self.stats.factor_ms += ms(t0);
        self.stats.steps += 1;
        Ok(true)
    }

    fn begin_iteration(&mut self) {
        self.gather = self.params.gather;
    }

    /// The barrier curvature at the current iterate. H(x_start) holds it as it was at
    /// x_start: none for vertices that came into contact since, and a log barrier's stiffness
    /// grows without bound as d → 0 — without the current curvature every direction drives
    /// the touching vertices into the obstacle and the step filter cuts α to nothing
    /// (`drop.toml`'s impact: 672 iterations with s = 1, steps at the 1000 cap with s = 2).
    /// So the per-vertex barrier blocks (β n nᵀ summed, [`crate::solver::pd::contact_terms`])
    /// at the current iterate replace those of x_start in the diagonal blocks of the
    /// subdomains that hold the vertex, and only those subdomains are refactored — when a
    /// vertex enters or leaves contact or its block's size changes tenfold. The history is
    /// dropped then, as QN's is when its contact set changes.
    fn refresh(&mut self, problem: &StepProblem, backend: &mut B) -> Result<Refresh> {
        if problem.model.obstacles.is_empty() {
            return Ok(Refresh::default());
        }
        backend.contact_terms(problem, &mut self.terms)?;
        let now = blocks(&self.terms);
        let count = self.terms.len();
        if !stale(&self.folded, &now) {
            return Ok(Refresh {
                terms: count,
                changed: false,
            });
        }
        let t0 = Instant::now();
        let mut which = vec![false; self.subs.len()];
        let verts = &self.decomposition.vertices;
        for (v, _) in self.folded.iter().chain(&now) {
            for (j, w) in which.iter_mut().enumerate() {
                if verts[j].binary_search(v).is_ok() {
                    *w = true;
                }
            }
        }
        self.folded = now;
        self.factor_some(Some(&which))?;
        self.stats.contact_refactors += which.iter().filter(|&&w| w).count();
        self.stats.factor_ms += ms(t0);
        Ok(Refresh {
            terms: count,
            changed: true,
        })
    }

    /// Scatter (duplicate interface entries), back-solve every subdomain in parallel, gather
    /// (sum the copies, then B = 1/n_v unless the symmetric fallback is on).
    fn apply(&mut self, v: &mut [f64]) -> Result<()> {
        let t0 = Instant::now();
        let par = if self.subs.len() == 1 {
            faer::get_global_parallelism()
        } else {
            Par::Seq
        };
        {
            let q: &[f64] = v;
            self.subs.par_iter_mut().try_for_each(|s| {
                for (r, &g) in s.rhs.iter_mut().zip(&s.dofs) {
                    *r = q[g as usize];
                }
                s.factor
                    .solve_many_in_place_with(&mut s.rhs, 1, par)
                    .map_err(|e| JelloError::Solver(format!("dot: back-solve: {e}")))
            })?;
        }
        let out = &mut self.scratch;
        out.iter_mut().for_each(|x| *x = 0.0);
        for s in &self.subs {
            for (&g, &r) in s.dofs.iter().zip(&s.rhs) {
                out[g as usize] += r;
            }
        }
        for &g in &self.loose {
            let g = g as usize;
            let d = self.global.values()[self.layout.diag[g]];
            out[g] = if d > 0.0 { v[g] / d } else { 0.0 };
        }
        match self.gather {
            Gather::Average => {
                for (x, (&o, &w)) in v.iter_mut().zip(out.iter().zip(&self.weight)) {
                    *x = if w > 0.0 { o * w } else { o };
                }
            }
            Gather::Sum => v.copy_from_slice(out),
        }
        self.stats.solve_ms += ms(t0);
        self.stats.applications += 1;
        Ok(())
    }

    /// The symmetric Sᵀ diag(H_j⁻¹) S (no B): SPD, so −D g is a descent direction whatever
    /// the interfaces do to the averaged D₁ (not symmetric in general).
    fn fallback(&mut self) -> bool {
        if self.gather == Gather::Average && self.subs.len() > 1 {
            self.gather = Gather::Sum;
            true
        } else {
            false
        }
    }

    fn wants_start_length(&self) -> bool {
        self.params.quadratic_start
    }

    /// dᵀ ∇²E(x_start) d with the projected Hessian of the step's start (Algorithm 1's x^t),
    /// where d is: the backend's element Hessians plus its inertia and barrier blocks (on a
    /// device one kernel pass and a reduction; the f64 backend sums the same terms).
    fn curvature(
        &mut self,
        problem: &StepProblem,
        backend: &mut B,
        d: B::Vector,
        out: B::Scalar,
    ) -> Result<()> {
        let t0 = Instant::now();
        backend.start_curvature(problem, d, out)?;
        self.stats.curvature_ms += ms(t0);
        Ok(())
    }

    /// Eq. 14: α₀ = max(floor, −∇Eᵀd / dᵀHd), no upper cap.
    fn start_length(&self, slope: f64, curvature: f64) -> Option<f64> {
        let fit = -slope / curvature;
        Some(if fit.is_finite() && curvature > 0.0 {
            fit.max(self.params.start_floor)
        } else {
            1.0
        })
    }
}
