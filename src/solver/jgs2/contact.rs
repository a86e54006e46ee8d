//! IPC contact in the per-vertex solvers on the f64 backend: the barrier and lagged-friction
//! terms at a point, as each vertex's local system reads them, and the per-vertex step filter.
//!
//! # How contact enters a local system
//! The contact potential κ·Σ m·b(d) + D (IPC's barrier over point–triangle and edge–edge pairs,
//! lagged friction) adds to the assembled gradient g at every vertex of an active pair — so the
//! residual, JGS2's subspace right-hand side (which reads g over the whole body) and the fixed
//! point are those of Newton-IPC — and the diagonal 3×3 block of each pair's PSD-projected
//! Hessian to the vertex's matrix A_i, the pair's other vertices held. The safeguard's Hessian
//! products use the whole 12×12 pair blocks.
//!
//! The JGS2 paper (§7) instead extends a contacting vertex's perturbation to the vertices it
//! touches on the other body (their subspace rows set to the same perturbation). We keep the
//! partners held: in a Jacobi sweep the partners solve their own systems at the same time, and
//! a perturbation shared across the pair would count the pair's stiffness into both sides' steps
//! at once; the barrier block already makes the vertex as stiff against its partner as the pair
//! is. The measured cost of this choice against Newton-IPC is in the issue note.
//!
//! # Step filter
//! Every group of vertices that moves together (all free vertices in a Jacobi iteration, one
//! colour in a Gauss–Seidel sweep) has its moves limited per vertex by additive CCD
//! ([`crate::contact::IpcContact::vertex_step_bounds`]: a vertex near no contact keeps its whole
//! step), and the scaled moves are then checked as one joint move
//! ([`crate::contact::IpcContact::max_step_at`]), scaled down together if that check bites — so
//! no iterate of a sweep intersects, whatever the group. The safeguard's combined steps go through
//! the whole-step filter (`StepProblem::max_obstacle_step`, which includes IPC's CCD).

use crate::problem::StepProblem;
use nalgebra::{Matrix3, SMatrix, Vector3};

/// A pair block: stencil ids (collision-mesh ids; ≥ the model's vertex count are obstacle
/// vertices) and its 12×12 PSD Hessian, N/m.
type Block = ([u32; 4], SMatrix<f64, 12, 12>);

/// The IPC barrier and lagged-friction terms at one point.
#[derive(Clone, Debug, Default)]
pub(super) struct VertexContact {
    /// κ·∇(Σ m·b) + ∇D, flat (N); zero on pinned vertices.
    grad: Vec<f64>,
    /// The diagonal 3×3 block of each vertex's pair Hessians (N/m), indexed by model vertex
    /// (empty map entries are zero: `diag_of` answers them).
    diag: Vec<(u32, Matrix3<f64>)>,
    /// Every pair's PSD Hessian block.
    blocks: Vec<Block>,
    /// Model vertices in any active pair (sorted, unique).
    touched: Vec<u32>,
}

impl VertexContact {
    /// The terms at `x` (m), or `None` without IPC contact. A touching pair (which the step
    /// filters never produce) makes the gradient non-finite, so the iteration reports it.
    pub(super) fn at(problem: &StepProblem, x: &[f64]) -> Option<Self> {
        let ipc = problem.model.contact.as_ref()?;
        let n = problem.model.num_vertices();
        let xs = problem.contact_positions(ipc, x);
        let mut grad = vec![0.0; x.len()];
        let mut blocks = Vec::new();
        match ipc.active_pairs(&xs) {
            Ok(pairs) => {
                let kappa = problem.kappa();
                if !ipc.add_gradient(&pairs, &xs, kappa, &mut grad).is_finite() {
                    grad.iter_mut().for_each(|g| *g = f64::NAN);
                }
                blocks = ipc.hessian_blocks(&pairs, &xs, kappa);
            }
            Err(_) => grad.iter_mut().for_each(|g| *g = f64::NAN),
        }
        if let Some(f) = problem.lagged_friction() {
            f.0.add_gradient(x, &problem.x_hat, &mut grad);
            blocks.extend(f.0.hessian_blocks(x, &problem.x_hat));
        }
        for (v, g) in grad.chunks_mut(3).enumerate() {
            if problem.model.pinned[v] {
                g.iter_mut().for_each(|c| *c = 0.0);
            }
        }
        let mut diag: Vec<(u32, Matrix3<f64>)> = blocks
            .iter()
            .flat_map(|(ids, h)| {
                ids.iter().enumerate().filter_map(move |(a, &v)| {
                    ((v as usize) < n).then(|| (v, h.fixed_view::<3, 3>(3 * a, 3 * a).into()))
                })
            })
            .collect();
        diag.sort_by_key(|(v, _)| *v);
        let mut merged: Vec<(u32, Matrix3<f64>)> = Vec::with_capacity(diag.len());
        for (v, m) in diag {
            match merged.last_mut() {
                Some((u, acc)) if *u == v => *acc += m,
                _ => merged.push((v, m)),
            }
        }
        let touched = merged.iter().map(|(v, _)| *v).collect();
        Some(VertexContact {
            grad,
            diag: merged,
            blocks,
            touched,
        })
    }

    /// The contact gradient at vertex `v`, N.
    pub(super) fn grad_of(&self, v: usize) -> Vector3<f64> {
        Vector3::from_column_slice(&self.grad[3 * v..3 * v + 3])
    }

    /// The diagonal block of vertex `v`'s pair Hessians, N/m (zero away from contact).
    pub(super) fn diag_of(&self, v: usize) -> Matrix3<f64> {
        match self.diag.binary_search_by_key(&(v as u32), |(u, _)| *u) {
            Ok(k) => self.diag[k].1,
            Err(_) => Matrix3::zeros(),
        }
    }

    /// Model vertices in an active pair (sorted): those whose gradient the terms change.
    pub(super) fn touched(&self) -> &[u32] {
        &self.touched
    }

    /// `out += H_c v` over the pair blocks, skipping pinned vertices and obstacle ids.
    pub(super) fn add_hess_vec(&self, problem: &StepProblem, v: &[f64], out: &mut [f64]) {
        let n = problem.model.num_vertices();
        let pinned = &problem.model.pinned;
        let dof = |id: u32| (id as usize) < n && !pinned[id as usize];
        for (ids, h) in &self.blocks {
            for (a, &va) in ids.iter().enumerate() {
                if !dof(va) {
                    continue;
                }
                let mut y = Vector3::zeros();
                for (b, &vb) in ids.iter().enumerate() {
                    if dof(vb) {
                        let vv =
                            Vector3::from_column_slice(&v[3 * vb as usize..3 * vb as usize + 3]);
                        y += h.fixed_view::<3, 3>(3 * a, 3 * b) * vv;
                    }
                }
                for c in 0..3 {
                    out[3 * va as usize + c] += y[c];
                }
            }
        }
    }
}

/// Limits the moves `steps` of the vertices `group` (moving together from `x`, m) so that no
/// surface pair comes into contact (module docs): per vertex by its pairs' times of impact, then
/// the scaled moves together by one joint CCD. No-op without IPC contact.
pub(super) fn filter_group(
    problem: &StepProblem,
    x: &[f64],
    group: &[u32],
    steps: &mut [Vector3<f64>],
) {
    let Some(ipc) = &problem.model.contact else {
        return;
    };
    let xs = problem.contact_positions(ipc, x);
    let mut dx = vec![0.0; x.len()];
    let scatter = |dx: &mut [f64], steps: &[Vector3<f64>]| {
        for (&i, d) in group.iter().zip(steps) {
            dx[3 * i as usize..3 * i as usize + 3].copy_from_slice(d.as_slice());
        }
    };
    scatter(&mut dx, steps);
    // Only a non-finite position or step fails the broad phase: no move then.
    let Ok(bounds) = ipc.vertex_step_bounds(&xs, &dx) else {
        steps.iter_mut().for_each(|d| *d = Vector3::zeros());
        return;
    };
    for (&i, d) in group.iter().zip(steps.iter_mut()) {
        *d *= bounds[i as usize];
    }
    scatter(&mut dx, steps);
    let joint = ipc.max_step_at(&xs, &dx, 1.0).unwrap_or(0.0);
    if joint < 1.0 {
        steps.iter_mut().for_each(|d| *d *= joint);
    }
}
