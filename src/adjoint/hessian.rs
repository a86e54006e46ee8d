//! The exact Hessian of a step's incremental potential at its converged state, on the free
//! DOFs, factored once per step of the backward pass.

use super::contact::{add_products, ContactBlocks};
use crate::error::{JelloError, Result};
use crate::material::element_hessian_filtered;
use crate::problem::potential::corners;
use crate::problem::{barrier_derivatives, HessianLayout, Model, PackedTetHessian, StepProblem};
use crate::solver::augmented::ContactSystems;
use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::sparse::{pack_upper_blocks, SymSparse};
use nalgebra::{Matrix3, SMatrix, SVector, Vector3};
use rayon::prelude::*;

/// The true (unfiltered) 12×12 Hessian of tet `t`'s elastic energy at `x` (N/m).
pub(super) fn element_exact(model: &Model, x: &[f64], t: usize) -> SMatrix<f64, 12, 12> {
    let s = element_hessian_filtered(
        &model.materials[t],
        &model.rest[t],
        &corners(x, &model.mesh.tets[t]),
        None,
    );
    s.hessian.unwrap_or_else(SMatrix::zeros)
}

/// The 3×3 Hessian block (N/m) of vertex `v`'s obstacle barrier at `p` (m), exact:
/// w·(b''∇d∇dᵀ + b'∇²d), w = κ·m_v/h² — Newton's projected block drops b'∇²d (b' < 0), which
/// is zero for a half-space, so there the two agree.
pub(super) fn vertex_barrier_exact(
    model: &Model,
    h: f64,
    v: usize,
    p: &Vector3<f64>,
) -> Matrix3<f64> {
    let dhat = model.barrier.dhat;
    let w = model.barrier.kappa * model.mass[v] / (h * h);
    let mut k = Matrix3::zeros();
    for o in model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
        let de = o.distance(p);
        if de.d < dhat {
            let (_, db, ddb) = barrier_derivatives(de.d, dhat);
            k += (de.grad * de.grad.transpose() * ddb + de.hess * db) * w;
        }
    }
    k
}

/// ∂(∇B_v)/∂m_v (N/kg) of vertex `v`'s obstacle barrier at `p`: κ/h²·b'(d)∇d.
pub(super) fn vertex_barrier_mass_derivative(
    model: &Model,
    h: f64,
    p: &Vector3<f64>,
) -> Vector3<f64> {
    let dhat = model.barrier.dhat;
    let w = model.barrier.kappa / (h * h);
    let mut g = Vector3::zeros();
    for o in model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
        let de = o.distance(p);
        if de.d < dhat {
            let (_, db, _) = barrier_derivatives(de.d, dhat);
            g += de.grad * (w * db);
        }
    }
    g
}

/// The free-DOF block H_ff of ∇²E at a converged state (pinned rows and columns identity),
/// factored by the sparse Cholesky analysed once for the model — or, when contact pairs couple
/// vertices that share no tet, by an augmented system holding those couplings too (Newton's,
/// [`crate::solver::augmented`], analysed with the elastic ordering).
pub(super) struct ExactHessian {
    layout: HessianLayout,
    matrix: SymSparse,
    factor: SparseCholesky,
    packed: Vec<PackedTetHessian>,
    contact: ContactSystems,
    /// Whether the last factorisation is the augmented system's.
    augmented: bool,
}

impl ExactHessian {
    pub(super) fn new(model: &Model) -> Result<Self> {
        let layout = HessianLayout::new(model)?;
        let factor = SparseCholesky::analyze(layout.pattern.clone(), Ordering::default())
            .map_err(|e| JelloError::Solver(format!("adjoint: Cholesky analysis: {e}")))?;
        let matrix = layout.zeros();
        Ok(ExactHessian {
            layout,
            matrix,
            factor,
            packed: Vec::new(),
            contact: ContactSystems::default(),
            augmented: false,
        })
    }

    /// Assembles and factors H = M/ĥ² + ∇²Ψ + ∇²B (+ the contact `blocks`) at `x` for
    /// `problem` (its inertia weight 1/ĥ², its real step h for the barrier weights). An exact
    /// Hessian that is not positive definite (a saddle or a degenerate minimum: the step's
    /// solution is not locally unique) is an error naming `step`: the adjoint is not defined
    /// there.
    pub(super) fn factor_at(
        &mut self,
        problem: &StepProblem,
        x: &[f64],
        blocks: &ContactBlocks,
        step: usize,
    ) -> Result<()> {
        let model = problem.model;
        let (inertia, h) = (problem.inertia, problem.h);
        let tets = &model.mesh.tets;
        self.packed.resize(tets.len(), [0.0; 90]);
        self.packed.par_iter_mut().enumerate().for_each(|(t, out)| {
            let k = element_exact(model, x, t);
            let row_major: [f64; 144] = std::array::from_fn(|i| k[(i / 12, i % 12)]);
            pack_upper_blocks(&tets[t], &row_major, out);
        });
        self.matrix
            .gather_blocks(&self.layout.block_gather, self.packed.as_flattened());
        let pattern = self.layout.pattern.clone();
        let values = self.matrix.values_mut();
        for v in 0..model.num_vertices() {
            if model.pinned[v] {
                for k in 0..3 {
                    values[self.layout.diag[3 * v + k]] = 1.0;
                }
                continue;
            }
            for k in 0..3 {
                values[self.layout.diag[3 * v + k]] += model.mass[v] * inertia;
            }
            if !model.obstacles.is_empty() {
                let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
                let kb = vertex_barrier_exact(model, h, v, &p);
                for i in 0..3 {
                    for j in i..3 {
                        if let Some(at) = pattern.find(3 * v + i, 3 * v + j) {
                            values[at] += kb[(i, j)];
                        }
                    }
                }
            }
        }
        let not_pd = |e| {
            JelloError::Solver(format!(
                "adjoint: step {step}: the exact Hessian at the converged state is not positive \
                 definite ({e}): the step's solution is not a strict minimum, so its derivative \
                 is undefined"
            ))
        };
        let list: Vec<_> = blocks.all().cloned().collect();
        let needed: Vec<[u32; 2]> = problem
            .contact_couplings(&list)
            .into_iter()
            .filter(|&[a, b]| pattern.find(3 * a as usize, 3 * b as usize).is_none())
            .collect();
        self.augmented = !needed.is_empty();
        if self.augmented {
            let sys = self
                .contact
                .ensure(&self.layout.pattern, &self.factor, needed, true)?;
            sys.load(&self.matrix);
            problem.add_contact_hessian(&list, &mut sys.matrix)?;
            sys.factor.refactor(&sys.matrix).map_err(not_pd)
        } else {
            problem.add_contact_hessian(&list, &mut self.matrix)?;
            self.factor.refactor(&self.matrix).map_err(not_pd)
        }
    }

    /// Solves H_ff λ = `rhs` in place (pinned entries of `rhs` must be zero; they stay zero).
    pub(super) fn solve(&self, rhs: &mut [f64]) -> Result<()> {
        let factor = match (self.augmented, self.contact.current()) {
            (true, Some(sys)) => &sys.factor,
            _ => &self.factor,
        };
        factor
            .solve_in_place(rhs)
            .map_err(|e| JelloError::Solver(format!("adjoint: Cholesky solve: {e}")))
    }
}

/// (H λ) on the pinned DOFs (N/m × m): the free–pinned coupling of the exact Hessian — the
/// elastic terms' and the contact `blocks'` — applied to `lambda` (zero on pinned DOFs), added
/// into `out` (3n).
pub(super) fn pinned_coupling(
    model: &Model,
    x: &[f64],
    blocks: &ContactBlocks,
    lambda: &[f64],
    out: &mut [f64],
) {
    add_products(blocks.all(), model.num_vertices(), lambda, out, |v| {
        model.pinned[v]
    });
    let tets = &model.mesh.tets;
    let mixed: Vec<usize> = (0..tets.len())
        .filter(|&t| {
            let pinned = tets[t]
                .iter()
                .filter(|&&v| model.pinned[v as usize])
                .count();
            pinned > 0 && pinned < 4
        })
        .collect();
    let parts: Vec<(usize, SVector<f64, 12>)> = mixed
        .par_iter()
        .map(|&t| {
            let k = element_exact(model, x, t);
            let l = SVector::<f64, 12>::from_fn(|i, _| lambda[3 * tets[t][i / 3] as usize + i % 3]);
            (t, k * l)
        })
        .collect();
    for (t, kl) in parts {
        for (a, &v) in tets[t].iter().enumerate() {
            if model.pinned[v as usize] {
                for i in 0..3 {
                    out[3 * v as usize + i] += kl[3 * a + i];
                }
            }
        }
    }
}
