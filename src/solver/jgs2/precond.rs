//! JGS2 as a linear preconditioner (issue 13, "Beyond the paper: JGS2 as the smoother"): the
//! map `r ↦ d` that one plain JGS2 Jacobi step gives for the gradient `g = −r`, with every
//! local matrix `A_i` and every rotation `R_j` frozen at one iterate.
//!
//! Per free vertex i (`jgs2_rhs`, `jgs2_matrix` in `local.rs`, the same arithmetic as
//! [`super::Jgs2Solver`]'s step):
//!
//! ```text
//! d_i = A_i⁻¹ (r_i + R_i Σ_{j≠i} Ū_i[j]ᵀ R_jᵀ r_j)      (far field as the subspace stores it)
//! ```
//!
//! Linear in `r` for fixed `A_i` and `R_j`. What the Jacobi step adds on top — the obstacle
//! step filter, the inversion limit, the safeguard's model minimiser and line search — makes
//! it nonlinear and is left out: a Krylov method needs the same operator at every iteration.
//! At rest with exact subspace rows `A_i` is the Schur complement `Ū_iᵀH̄Ū_i` and the map is
//! `H̄⁻¹` exactly (one Jacobi step is the Newton step, `tests/cpu/jgs2.rs`). Away from rest it is
//! not symmetric — `A_i` carries the incident elements' current Hessians and `R_i`'s
//! co-rotation while the far sums use the rest-shape rows, and the compressed far field
//! (node fits, H-matrix) is not symmetric either — so it is used in the flexible PCG
//! ([`crate::solver::pcg::Beta::PolakRibiere`]), which keeps the quadratic decreasing
//! monotonically for any preconditioner (each step is an exact line minimisation).
//!
//! The local matrices include, besides what JGS2 puts there, each free vertex's own 3×3
//! diagonal blocks of the IPC contact stencils passed to [`Jgs2Preconditioner::freeze`]: JGS2
//! itself does not run IPC contact, but a preconditioner for a Hessian with contact that
//! ignored the barrier's curvature would be far too soft at the contacting vertices.

use super::local::{
    barrier_hessian, element_pass, hmatrix_far_field, jgs2_matrix, jgs2_rhs, rest_frame_gradients,
    rotations, vbd_system, ElementCache,
};
use super::subspace::Jgs2Subspace;
use crate::error::{JelloError, Result};
use crate::mesh::VertexTets;
use crate::problem::{Model, StepProblem};
use nalgebra::{Cholesky, Matrix3, SMatrix, Vector3, U3};
use rayon::prelude::*;
use std::sync::Arc;

/// Builds frozen JGS2 preconditioners ([`FrozenJgs2`]) for one model and subspace; keeps the
/// element cache between freezes so its storage is reused.
pub struct Jgs2Preconditioner {
    subspace: Arc<Jgs2Subspace>,
    vertex_tets: VertexTets,
    free: Vec<u32>,
    cache: ElementCache,
}

/// One vertex's frozen local solve.
#[derive(Clone, Debug)]
enum LocalSolve {
    /// `A_i` (JGS2) factored: the right-hand side includes the subspace sum.
    Jgs2(Cholesky<f64, U3>),
    /// `A_i` was not SPD in round-off: the vertex's VBD block (right-hand side `r_i` alone),
    /// as [`super::Jgs2Solver`] falls back.
    Vbd(Cholesky<f64, U3>),
    /// Neither factors: the vertex's output is zero.
    Zero,
}

/// The JGS2 map at one iterate, a fixed linear operator ([`Self::apply`]).
#[derive(Clone, Debug)]
pub struct FrozenJgs2 {
    subspace: Arc<Jgs2Subspace>,
    rot: Vec<Matrix3<f64>>,
    free: Vec<u32>,
    local: Vec<LocalSolve>,
    /// Per vertex: its residual is left out of the subspace sums (pinned, or in an IPC
    /// stencil).
    masked: Vec<bool>,
}

impl Jgs2Preconditioner {
    /// The preconditioner for `model` on a JGS2 subspace built for it (same vertex count).
    pub fn new(model: &Model, subspace: Arc<Jgs2Subspace>) -> Result<Self> {
        if subspace.vertices.len() != model.num_vertices() {
            return Err(JelloError::Solver(format!(
                "JGS2 preconditioner: the subspace has {} vertices, the model {}",
                subspace.vertices.len(),
                model.num_vertices()
            )));
        }
        Ok(Jgs2Preconditioner {
            subspace,
            vertex_tets: VertexTets::new(&model.mesh),
            free: (0..model.num_vertices() as u32)
                .filter(|&v| !model.pinned[v as usize])
                .collect(),
            cache: ElementCache::default(),
        })
    }

    /// The subspace.
    pub fn subspace(&self) -> &Arc<Jgs2Subspace> {
        &self.subspace
    }

    /// Freezes the map at `x` (m): element Hessians, rotations and every free vertex's `A_i`
    /// (plus its diagonal blocks of the IPC `contact` stencils, N/m — the type
    /// [`StepProblem::contact_hessian_blocks`] returns; ids ≥ the vertex count have no DOF)
    /// factored once, for every later [`FrozenJgs2::apply`].
    pub fn freeze(
        &mut self,
        problem: &StepProblem,
        x: &[f64],
        contact: &[([u32; 4], SMatrix<f64, 12, 12>)],
    ) -> FrozenJgs2 {
        let model = problem.model;
        let n = model.num_vertices();
        element_pass(model, x, &mut self.cache, None);
        let rot = rotations(model, x, &self.vertex_tets);
        let mut extra = vec![Matrix3::<f64>::zeros(); n];
        let mut in_contact = vec![false; n];
        for (ids, h) in contact {
            for (c, &v) in ids.iter().enumerate() {
                if (v as usize) < n {
                    extra[v as usize] += h.fixed_view::<3, 3>(3 * c, 3 * c);
                    in_contact[v as usize] = true;
                }
            }
        }
        // Vertices under an obstacle barrier are treated like IPC-contact ones (module docs).
        for &i in &self.free {
            let i = i as usize;
            if barrier_hessian(problem, x, i) != Matrix3::zeros() {
                in_contact[i] = true;
            }
        }
        let s = &self.subspace;
        let (cache, vt) = (&self.cache, &self.vertex_tets);
        let local = self
            .free
            .par_iter()
            .map(|&i| {
                let i = i as usize;
                if !in_contact[i] {
                    let a = jgs2_matrix(problem, cache, vt, x, Some(&rot), i, &s.vertices[i]);
                    if let Some(c) = (a + extra[i]).cholesky() {
                        return LocalSolve::Jgs2(c);
                    }
                }
                let (a, _) = vbd_system(problem, cache, vt, x, &vec![0.0; 3 * n], i);
                match (a + extra[i]).cholesky() {
                    Some(c) => LocalSolve::Vbd(c),
                    None => LocalSolve::Zero,
                }
            })
            .collect();
        FrozenJgs2 {
            subspace: self.subspace.clone(),
            rot,
            free: self.free.clone(),
            local,
            // Pinned and IPC-contact vertices feed no subspace sum (module docs).
            masked: (0..n).map(|v| model.pinned[v] || in_contact[v]).collect(),
        }
    }
}

impl FrozenJgs2 {
    /// `z = P r` (`r` in N, `z` in m; both length 3n): every free vertex's JGS2 step for the
    /// gradient `−r`; zero at pinned vertices, whose entries of `r` are ignored.
    pub fn apply(&self, r: &[f64], z: &mut [f64]) {
        let s = &self.subspace;
        let mut masked = r.to_vec();
        for (v, &m) in self.masked.iter().enumerate() {
            if m {
                masked[3 * v..3 * v + 3].fill(0.0);
            }
        }
        let mut frame = rest_frame_gradients(&masked, Some(&self.rot), &s.tree, &s.rest);
        if let Some(far) = &s.far_hmatrix {
            hmatrix_far_field(&mut frame, &s.tree, far);
        }
        let steps: Vec<Vector3<f64>> = self
            .free
            .par_iter()
            .zip(self.local.par_iter())
            .map(|(&i, solve)| {
                let i = i as usize;
                let d = match solve {
                    LocalSolve::Jgs2(c) => c.solve(&jgs2_rhs(
                        &masked,
                        Some(&self.rot),
                        &frame,
                        i,
                        &s.vertices[i],
                    )),
                    LocalSolve::Vbd(c) => {
                        c.solve(&Vector3::from_column_slice(&r[3 * i..3 * i + 3]))
                    }
                    LocalSolve::Zero => Vector3::zeros(),
                };
                if d.iter().all(|v| v.is_finite()) {
                    d
                } else {
                    Vector3::zeros()
                }
            })
            .collect();
        z.fill(0.0);
        for (&i, d) in self.free.iter().zip(&steps) {
            z[3 * i as usize..3 * i as usize + 3].copy_from_slice(d.as_slice());
        }
    }
}
