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
//! # Coupling across bodies
//! The JGS2 paper (§7) instead extends a contacting vertex's perturbation to the vertices it
//! touches on the other body (their subspace rows set to the same perturbation), assuming
//! contact much stiffer than elasticity. That is [`ContactCoupling::Extended`] (CPU only): the
//! vertex's system adds each partner's block-Jacobi system (its inertia, elements and obstacle
//! barriers; its assembled gradient, contact included) and the pair blocks' curvature along the
//! shared move (Σ_{a,b} H_ab over the corners that move). The default,
//! [`ContactCoupling::Held`], keeps the partners held: the pair's diagonal block makes the vertex
//! as stiff against its partner as the pair is. Why the held default: along a shared move the
//! barrier and friction see no relative motion, so the coupled system drops the pair's
//! stiffness and, in its right-hand side, the contact forces (they cancel between the sides); it
//! moves the touching vertices together under the load, but leaves the gap — the mode that
//! carries the load through the contact — to the safeguard's other directions, and in a Jacobi
//! sweep every partner takes the same shared step at once. Measured (CN 1e-7, from each scene's
//! start, `jello run --solver jgs2 --backend cpu`, 12 steps of contact_stack.toml and 8 of
//! house_of_cards.toml; `benches/ipc_solvers.rs` has both columns): held 1,041 and 3,094
//! iterations, extended 1,125 and 4,345, every step converged either way. What the slow
//! modes are, and the option that removes most of them ([`ContactCoupling::Coarse`]: the
//! partners held plus a Galerkin correction on every body's octants), is in `coarse.rs`.

//! # Step filter
//! Every group of vertices that moves together (all free vertices in a Jacobi iteration, one
//! colour in a Gauss–Seidel sweep) has its moves limited per vertex by additive CCD
//! ([`crate::contact::IpcContact::vertex_step_bounds`]: a vertex near no contact keeps its whole
//! step), and the scaled moves are then checked as one joint move
//! ([`crate::contact::IpcContact::max_step_on`]), scaled down together if that check bites — so
//! no iterate of a sweep intersects, whatever the group. The safeguard's combined steps go through
//! the whole-step filter (`StepProblem::max_obstacle_step`, which includes IPC's CCD).
//!
//! CCD alone only keeps a pair apart: additive CCD stops a pair at a tenth of its gap, so a
//! vertex pushed toward another body iteration after iteration could close the gap
//! geometrically, with nothing but the barrier in its 3×3 model to stop it. The JGS2 paper (§7)
//! calls for a line search in each
//! sub-problem: a VBD step is a Newton step on the vertex's local energy (its inertia, elements,
//! barriers and friction, the other vertices held), so where a candidate pair may act along the
//! move the step is halved until that energy does not rise. A JGS2 step is not one on the local
//! energy (the rest of the body is meant to follow), so it is left to the safeguard's energy
//! test on the whole step.

use crate::contact::barrier::barrier;
use crate::contact::ContactPair;
use crate::material::element_energy;
use crate::mesh::VertexTets;
use crate::problem::potential::corners;
use crate::problem::StepProblem;
use nalgebra::{Matrix3, SMatrix, Vector3};
use rayon::prelude::*;

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
    /// (model vertex, index into `blocks`) for every model vertex of every block's stencil,
    /// sorted.
    blocks_of: Vec<(u32, u32)>,
    /// (free model vertex, free model vertex of another collision body) sharing a block,
    /// sorted, unique: the partners [`ContactCoupling::Extended`] moves along.
    partners: Vec<(u32, u32)>,
}

/// How a JGS2 vertex in contact sees the bodies it touches (CPU backend; module docs,
/// "Coupling across bodies"). Set with `Jgs2Solver::with_contact_coupling`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ContactCoupling {
    /// The partners held: the pair's diagonal Hessian block joins the vertex's matrix (the
    /// default, and the device's only behaviour).
    #[default]
    Held,
    /// The JGS2 paper's §7: the vertex's perturbation extended to the vertices it touches on
    /// the other bodies (their subspace rows set to the same perturbation).
    Extended,
    /// The partners held, and the block-Jacobi direction of the model step gains a coarse
    /// correction: the step's quadratic model solved on the affine motions of each octant of
    /// every body (coarse.rs; the measured alternative to `Extended`).
    Coarse,
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
                ids.iter()
                    .enumerate()
                    .filter(move |(_, &v)| (v as usize) < n)
                    .map(move |(a, &v)| (v, h.fixed_view::<3, 3>(3 * a, 3 * a).into()))
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
        let free = |v: u32| (v as usize) < n && !problem.model.pinned[v as usize];
        let mut partners: Vec<(u32, u32)> = blocks
            .iter()
            .flat_map(|(ids, _)| {
                ids.iter().flat_map(move |&a| {
                    ids.iter()
                        .filter(move |&&b| free(a) && free(b) && ipc.body_of(a) != ipc.body_of(b))
                        .map(move |&b| (a, b))
                })
            })
            .collect();
        partners.sort_unstable();
        partners.dedup();
        Some(VertexContact {
            grad,
            diag: merged,
            blocks_of: by_vertex(blocks.iter().map(|(ids, _)| ids), n),
            blocks,
            touched,
            partners,
        })
    }

    /// The free vertices that free vertex `v` touches on other bodies (sorted).
    pub(super) fn partners_of(&self, v: usize) -> impl Iterator<Item = u32> + '_ {
        entries(&self.partners, v)
    }

    /// Σ_{a,b ∈ set} H_ab over every pair block with a corner in `set` (sorted model ids),
    /// N/m: the contact curvature along one perturbation shared by all of `set`. A pair whose
    /// every corner is in `set` adds nothing (the barrier and friction only see relative
    /// motion), so what stays is the pull of the corners left out.
    pub(super) fn shared_block(&self, set: &[u32]) -> Matrix3<f64> {
        let mut ks: Vec<u32> = set
            .iter()
            .flat_map(|&v| entries(&self.blocks_of, v as usize))
            .collect();
        ks.sort_unstable();
        ks.dedup();
        let mut m = Matrix3::zeros();
        for k in ks {
            let (ids, h) = &self.blocks[k as usize];
            let slots: Vec<usize> = (0..4)
                .filter(|&a| set.binary_search(&ids[a]).is_ok())
                .collect();
            for &a in &slots {
                for &b in &slots {
                    m += h.fixed_view::<3, 3>(3 * a, 3 * b);
                }
            }
        }
        m
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

    /// Every active pair's stencil (model vertex ids; obstacle ids ≥ the vertex count) and its
    /// PSD Hessian block (N/m).
    pub(super) fn blocks(&self) -> impl Iterator<Item = (&[u32; 4], &SMatrix<f64, 12, 12>)> {
        self.blocks.iter().map(|(ids, h)| (ids, h))
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
/// — with `local_search`, for steps that are Newton steps on the vertex's own local energy
/// (VBD's) — backtracked on that energy where a pair may act along the move, then the scaled
/// moves together by one joint CCD. One swept broad phase serves all three: each vertex's scaled
/// path lies on its original one. No-op without IPC contact.
pub(super) fn filter_group(
    problem: &StepProblem,
    vt: &VertexTets,
    x: &[f64],
    group: &[u32],
    steps: &mut [Vector3<f64>],
    local_search: bool,
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
    let mut ds: Vec<[f64; 3]> = bytemuck::cast_slice(&dx).to_vec();
    ds.resize(ipc.mesh.num_vertices(), [0.0; 3]);
    // Only a non-finite position or step fails the broad phase: no move then.
    let Ok(pairs) = ipc.swept_candidates(&xs, &ds) else {
        steps.iter_mut().for_each(|d| *d = Vector3::zeros());
        return;
    };
    if pairs.is_empty() {
        return;
    }
    let bounds = ipc.vertex_step_bounds(&pairs, &xs, &dx);
    for (&i, d) in group.iter().zip(steps.iter_mut()) {
        *d *= bounds[i as usize];
    }
    if local_search {
        let local = LocalEnergy::new(problem, vt, x, &xs, &pairs);
        steps
            .par_iter_mut()
            .zip(group.par_iter())
            .for_each(|(d, &i)| local.backtrack(i as usize, d));
    }
    scatter(&mut dx, steps);
    let joint = ipc.max_step_on(&pairs, &xs, &dx);
    if joint < 1.0 {
        steps.iter_mut().for_each(|d| *d *= joint);
    }
}

/// A vertex's local energy with every other vertex held (J): inertia and load, its elements,
/// its obstacle barriers, the IPC pairs of a candidate list it belongs to and its lagged
/// friction pairs — the energy whose Newton step VBD takes.
struct LocalEnergy<'a> {
    problem: &'a StepProblem<'a>,
    vt: &'a VertexTets,
    x: &'a [f64],
    xs: &'a [[f64; 3]],
    pairs: &'a [ContactPair],
    /// (model vertex, index into `pairs`), sorted.
    pairs_of: Vec<(u32, u32)>,
    /// (model vertex, index into the lagged friction pairs), sorted.
    friction_of: Vec<(u32, u32)>,
    friction: Option<std::sync::Arc<(crate::contact::friction::FrictionSet, f64)>>,
}

/// The entries of `index` for vertex `v`.
fn entries(index: &[(u32, u32)], v: usize) -> impl Iterator<Item = u32> + '_ {
    let lo = index.partition_point(|(u, _)| (*u as usize) < v);
    index[lo..]
        .iter()
        .take_while(move |(u, _)| *u as usize == v)
        .map(|(_, k)| *k)
}

/// (vertex, item) for every model vertex of every item's stencil, sorted.
fn by_vertex<'a>(stencils: impl Iterator<Item = &'a [u32; 4]>, n: usize) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = stencils
        .enumerate()
        .flat_map(|(k, ids)| {
            ids.iter()
                .filter(move |&&v| (v as usize) < n)
                .map(move |&v| (v, k as u32))
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

impl<'a> LocalEnergy<'a> {
    fn new(
        problem: &'a StepProblem<'a>,
        vt: &'a VertexTets,
        x: &'a [f64],
        xs: &'a [[f64; 3]],
        pairs: &'a [ContactPair],
    ) -> Self {
        let n = problem.model.num_vertices();
        let friction = problem.lagged_friction();
        let friction_of = friction
            .as_ref()
            .map(|f| by_vertex(f.0.pairs.iter().map(|p| &p.ids), n))
            .unwrap_or_default();
        LocalEnergy {
            problem,
            vt,
            x,
            xs,
            pairs,
            pairs_of: by_vertex(pairs.iter().map(|p| &p.ids), n),
            friction_of,
            friction,
        }
    }

    /// The local energy of vertex `v` at `p` (J; +∞ where a barrier is infeasible).
    fn at(&self, v: usize, p: &Vector3<f64>) -> f64 {
        let problem = self.problem;
        let model = problem.model;
        let x = self.x;
        let xt = Vector3::from_column_slice(&problem.x_tilde[3 * v..3 * v + 3]);
        let mut e = 0.5 * model.mass[v] * problem.inertia * (p - xt).norm_squared();
        if !problem.load.is_empty() {
            e -= Vector3::from_column_slice(&problem.load[3 * v..3 * v + 3]).dot(p);
        }
        for (t, c) in self.vt.of(v) {
            let t = t as usize;
            let mut q = corners(x, &model.mesh.tets[t]);
            q[c as usize] = *p;
            e += element_energy(&model.materials[t], &model.rest[t], &q);
        }
        let dhat = model.barrier.dhat;
        for o in model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
            let d = o.distance(p).d;
            if d <= 0.0 {
                return f64::INFINITY;
            }
            if d < dhat {
                e += problem.barrier_weight(v) * barrier(d, dhat).0;
            }
        }
        if let Some(ipc) = &model.contact {
            let kappa = problem.kappa();
            for k in entries(&self.pairs_of, v) {
                let pair = &self.pairs[k as usize];
                // The pair on its own four corners, vertex v moved to p.
                let mut corners4 = [[0.0; 3]; 4];
                for (slot, &u) in pair.ids.iter().enumerate() {
                    corners4[slot] = if u as usize == v {
                        [p.x, p.y, p.z]
                    } else {
                        self.xs[u as usize]
                    };
                }
                let local = ContactPair {
                    ids: [0, 1, 2, 3],
                    ..*pair
                };
                e += kappa * ipc.pair_value(&local, &corners4);
            }
        }
        if let Some(f) = &self.friction {
            let which: Vec<u32> = entries(&self.friction_of, v).collect();
            if !which.is_empty() {
                e += f.0.vertex_energy(&which, v, p, x, &problem.x_hat);
            }
        }
        e
    }

    /// Halves vertex `v`'s step `d` until its local energy does not rise (up to 20 times, then
    /// no move) — only where a candidate pair holds the vertex: elsewhere VBD's step is its
    /// published, unguarded one.
    fn backtrack(&self, v: usize, d: &mut Vector3<f64>) {
        if *d == Vector3::zeros() || entries(&self.pairs_of, v).next().is_none() {
            return;
        }
        let p0 = Vector3::from_column_slice(&self.x[3 * v..3 * v + 3]);
        let e0 = self.at(v, &p0);
        // Round-off of the local sum: its terms are of the size of e0 (well above it only for
        // an element far from rest, which the slack then follows through |e0|).
        let slack = 1e-12 * e0.abs() + 8.0 * f64::EPSILON;
        for _ in 0..=20 {
            let e1 = self.at(v, &(p0 + *d));
            if e1.is_finite() && e1 <= e0 + slack {
                return;
            }
            *d *= 0.5;
        }
        *d = Vector3::zeros();
    }
}
