//! The contact terms of a step's adjoint: IPC's barrier between meshes, its lagged friction,
//! and the surface pairs with spheres and boxes ([`crate::problem::surface_contact`]).
//!
//! Each enters the step's residual r(y) = ∇_f E(y) as a sum of pair potentials over a few
//! vertices, so each adds (i) its exact pair Hessian to H (IPC pairs:
//! [`crate::contact::IpcContact::exact_hessian_blocks`], the projection Newton applies left
//! out; friction: its Hessian, positive semi-definite by construction; surface pairs: central
//! differences of their analytic gradient, [`crate::problem::surface_contact::SurfacePair::hessian`],
//! not projected), (ii) its free–pinned coupling to the pinned targets' adjoint, and (iii) its
//! parameter terms: dL/dκ = −λᵀ∇(Σ m·b) for a fixed IPC stiffness, a surface pair's
//! mass-share weight to the vertex masses, and friction's explicit x̂ (its displacement is
//! y − x̂: dL/dx̂ += ∇²D λ).
//!
//! Held fixed within a step, as recorded: the IPC stiffness κ (a fixed `ipc_kappa`, or the
//! adaptive value Newton ended the step with — its selection is a clamp of a ratio of
//! gradients, which the derivative does not follow), friction's lagged normal forces,
//! tangent frames and pair list, and the set of active pairs.

use crate::contact::friction::FrictionSet;
use crate::problem::surface_contact::PairKind;
use crate::problem::{Model, StepProblem};
use nalgebra::SMatrix;
use std::sync::Arc;

/// A 12×12 pair block (N/m) over four global vertex ids (ids ≥ the model's vertex count are
/// obstacle vertices, without DOFs; a repeated id's extra rows are zero).
pub(super) type Block = ([u32; 4], SMatrix<f64, 12, 12>);

/// What a step's contact terms were, held fixed by its adjoint: κ (J/m⁴) and the lagged
/// friction Newton ended the step with.
#[derive(Clone, Default)]
pub(super) struct StepContact {
    pub kappa: f64,
    pub friction: Option<Arc<(FrictionSet, f64)>>,
}

impl StepContact {
    /// The contact state `problem` was solved with (read after the solve).
    pub(super) fn of(problem: &StepProblem) -> Self {
        StepContact {
            kappa: problem.kappa(),
            friction: problem.lagged_friction(),
        }
    }
}

/// The exact contact Hessian at a converged state, as pair blocks: the barriers' (IPC pairs
/// and surface pairs) and friction's apart (friction's also feeds x̂).
pub(super) struct ContactBlocks {
    pub barrier: Vec<Block>,
    pub friction: Vec<Block>,
}

impl ContactBlocks {
    /// The blocks at `y` of `problem` (the step's problem, for its obstacle positions, x̂ and
    /// step) with the recorded `contact`.
    pub(super) fn at(problem: &StepProblem, y: &[f64], contact: &StepContact) -> Self {
        let model = problem.model;
        let mut barrier = Vec::new();
        let mut friction = Vec::new();
        if let Some(ipc) = &model.contact {
            let xs = problem.contact_positions(ipc, y);
            if let Ok(pairs) = ipc.active_pairs(&xs) {
                barrier = ipc.exact_hessian_blocks(&pairs, &xs, contact.kappa);
            }
            if let Some(f) = &contact.friction {
                friction = f.0.hessian_blocks(y, &problem.x_hat);
            }
        }
        for (pair, h9) in problem.surface_pair_hessians(y, false) {
            let v = pair.vertices;
            let mut h = SMatrix::<f64, 12, 12>::zeros();
            h.fixed_view_mut::<9, 9>(0, 0).copy_from(&h9);
            barrier.push(([v[0], v[1], v[2], v[2]], h));
        }
        ContactBlocks { barrier, friction }
    }

    /// Every block.
    pub(super) fn all(&self) -> impl Iterator<Item = &Block> {
        self.barrier.iter().chain(&self.friction)
    }

    /// No contact terms.
    pub(super) fn none() -> Self {
        ContactBlocks {
            barrier: Vec::new(),
            friction: Vec::new(),
        }
    }
}

/// Adds Σ_blocks (H λ) to `out` on the rows of model vertices `rows` accepts (`lambda` and
/// `out` flat over the model's vertices).
pub(super) fn add_products<'a>(
    blocks: impl Iterator<Item = &'a Block>,
    n: usize,
    lambda: &[f64],
    out: &mut [f64],
    rows: impl Fn(usize) -> bool,
) {
    for (ids, h) in blocks {
        for (a, &va) in ids.iter().enumerate() {
            let va = va as usize;
            if va >= n || !rows(va) {
                continue;
            }
            for (b, &vb) in ids.iter().enumerate() {
                let vb = vb as usize;
                if vb >= n {
                    continue;
                }
                for i in 0..3 {
                    let mut s = 0.0;
                    for j in 0..3 {
                        s += h[(3 * a + i, 3 * b + j)] * lambda[3 * vb + j];
                    }
                    out[3 * va + i] += s;
                }
            }
        }
    }
}

/// dL/dκ ([L]·m⁴/J) through one step: −λᵀ ∂r/∂κ = −λᵀ∇(Σ m·b) at κ = 1 of the IPC pairs at
/// `y` (λ zero on pinned DOFs).
pub(super) fn stiffness_term(problem: &StepProblem, y: &[f64], lambda: &[f64]) -> f64 {
    let Some(ipc) = &problem.model.contact else {
        return 0.0;
    };
    let xs = problem.contact_positions(ipc, y);
    let Ok(pairs) = ipc.active_pairs(&xs) else {
        return 0.0;
    };
    let mut g = vec![0.0; y.len()];
    ipc.add_gradient(&pairs, &xs, 1.0, &mut g);
    -g.iter()
        .zip(lambda)
        .zip(&problem.fixed)
        .filter(|(_, &f)| !f)
        .map(|((g, l), _)| g * l)
        .sum::<f64>()
}

/// −λᵀ ∂r/∂m_u of the surface pairs at `y`, added into `out` per vertex: a pair's weight is
/// κ_b·share/h² with share = Σ_{v ∈ pair} m_v/(the primitives of its kind at v), so its
/// gradient g_k scales with share and ∂g_k/∂m_u = g_k/(share·count_u).
pub(super) fn surface_mass_terms(
    problem: &StepProblem,
    y: &[f64],
    lambda: &[f64],
    out: &mut [f64],
) {
    let model: &Model = problem.model;
    for (pair, ev) in problem.surface_pairs(y) {
        if !ev.energy.is_finite() {
            continue;
        }
        let (share, triangles) = match pair.kind {
            PairKind::TriangleSphere { face, .. } | PairKind::CornerTriangle { face, .. } => {
                (model.surface_mass[face], true)
            }
            PairKind::EdgeEdge { edge, .. } => (model.edge_mass[edge], false),
        };
        if share <= 0.0 {
            continue;
        }
        let mut c = 0.0;
        for k in 0..pair.count {
            let v = pair.vertices[k] as usize;
            for i in 0..3 {
                c += lambda[3 * v + i] * ev.grad[3 * k + i];
            }
        }
        for k in 0..pair.count {
            let u = pair.vertices[k] as usize;
            let count = if triangles {
                model.faces_of(u).len()
            } else {
                model.edges_of(u).len()
            };
            out[u] -= c / (share * count.max(1) as f64);
        }
    }
}
