//! [`Jgs2Backend`] in f64 on the CPU: the reference. Positions are the backend's current and
//! trial points; the element cache (gradients and PSD-projected Hessians of every element), the
//! assembled gradient g, the directions and their Hessian products live in the backend's
//! extension slot. Everything runs when called: a trial evaluates its energy only, and
//! [`Jgs2Backend::jgs2_accept`] the element pass, the gradient and the next iteration's
//! directions at the accepted point.
//!
//! What only this backend does (module docs of [`super::backend`]): every local step is
//! limited so that neither the vertex nor one of its surface triangles crosses an obstacle
//! ([`filter`]) and, under `strict_inversion`, so that every incident element stays above its
//! strict floor ([`keep_oriented`]); the combined step's bound is the f64 filter
//! (`StepProblem::max_step` under `strict_inversion`, else `max_obstacle_step`).

use super::backend::{Jgs2Backend, Jgs2Sample, Jgs2Setup, Jgs2StepFlags, Jgs2Trial, Next};
use super::coarse::CoarseSpace;
use super::contact::{filter_group, ContactCoupling, VertexContact};
use super::local::{
    element_gradient_pass, element_pass, hess_vec, hmatrix_far_field, jgs2_system,
    rest_frame_gradients, rotations, vbd_local_system, vbd_system, vertex_gradient, ElementCache,
    SEQUENTIAL_BELOW,
};
use super::solver::Variant;
use super::subspace::Jgs2Subspace;
use crate::error::{JelloError, Result};
use crate::mesh::{colour_vertices, VertexTets};
use crate::problem::{strict_volume_floor, ElasticTerms, Model, StepProblem};
use crate::solver::backend::{CpuBackend, PotentialBackend};
use crate::solver::report::max_vertex_norm;
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;
use std::sync::Arc;

/// JGS2 / VBD's state on the CPU backend (its extension slot).
struct CpuJgs2 {
    variant: Variant,
    subspace: Option<Arc<Jgs2Subspace>>,
    /// Per-vertex rotations at the state the subspace was linearised at (`None`: the rest
    /// shape, rotations = identity).
    origin: Option<Vec<Matrix3<f64>>>,
    vertex_tets: VertexTets,
    num_colours: usize,
    /// The free vertices of each colour, in colour order (the Gauss–Seidel groups).
    colour_free: Vec<Vec<u32>>,
    free: Vec<u32>,
    cache: ElementCache,
    /// Scratch of the plain VBD sweep: one colour's steps (reused across colours and steps).
    steps_buf: Vec<Vector3<f64>>,
    flags: Jgs2StepFlags,
    /// The assembled gradient at the current point (zero on pinned vertices).
    g: Vec<f64>,
    /// Directions at the current point: primary, block-Jacobi (VBD), previous step.
    dirs: [Option<Vec<f64>>; 3],
    /// The previous accepted step (zero at a step's start).
    prev: Vec<f64>,
    /// The combined direction of the last trial's coefficients, and its bound.
    step: Option<([f64; 3], Vec<f64>, f64)>,
    /// The last trial's α, energy change and `next`.
    trial: (f64, f64, Next),
    /// The energy change of the current point's last sample.
    energy: f64,
    /// IPC contact's terms at the point of `g` (`None` without contact; `contact.rs`).
    contact: Option<VertexContact>,
    /// How a JGS2 vertex in contact sees its partners on other bodies.
    coupling: ContactCoupling,
    /// The step's coarse space ([`ContactCoupling::Coarse`] with IPC contact and a subspace).
    coarse: Option<CoarseSpace>,
}

/// Builds the state for `model` into `b`'s extension slot.
pub(super) fn setup(b: &mut CpuBackend, model: &Model, setup: Jgs2Setup) {
    let colouring = colour_vertices(&model.mesh);
    let colour_free = colouring
        .groups
        .iter()
        .map(|g| {
            g.iter()
                .copied()
                .filter(|&v| !model.pinned[v as usize])
                .collect::<Vec<u32>>()
        })
        .filter(|g| !g.is_empty())
        .collect();
    let state = CpuJgs2 {
        variant: setup.variant,
        subspace: setup.subspace,
        origin: setup.origin,
        vertex_tets: VertexTets::new(&model.mesh),
        num_colours: colouring.num_colours(),
        colour_free,
        free: (0..model.num_vertices() as u32)
            .filter(|&v| !model.pinned[v as usize])
            .collect(),
        cache: ElementCache::default(),
        steps_buf: Vec::new(),
        flags: Jgs2StepFlags {
            safeguard: false,
            energy: false,
        },
        g: Vec::new(),
        dirs: [None, None, None],
        prev: Vec::new(),
        step: None,
        trial: (0.0, 0.0, Next::Plain),
        energy: 0.0,
        contact: None,
        coupling: ContactCoupling::default(),
        coarse: None,
    };
    *b.extension_mut() = Some(Box::new(state));
}

/// Sets the rotations the subspace was linearised at (see `Jgs2Solver::linearised_at`).
pub(super) fn set_origin(b: &mut CpuBackend, origin: Vec<Matrix3<f64>>) {
    if let Some(s) = b
        .extension_mut()
        .as_deref_mut()
        .and_then(|e| e.downcast_mut::<CpuJgs2>())
    {
        s.origin = Some(origin);
    }
}

/// Sets how JGS2 vertices in contact see their partners (see
/// `Jgs2Solver::with_contact_coupling`).
pub(super) fn set_coupling(b: &mut CpuBackend, coupling: ContactCoupling) {
    if let Some(s) = b
        .extension_mut()
        .as_deref_mut()
        .and_then(|e| e.downcast_mut::<CpuJgs2>())
    {
        s.coupling = coupling;
    }
}

/// Runs `f` on `b` and its JGS2 state, the state taken out of the slot meanwhile (so that `f`
/// can use both) and put back after.
fn with_state<R>(
    b: &mut CpuBackend,
    f: impl FnOnce(&mut CpuBackend, &mut CpuJgs2) -> Result<R>,
) -> Result<R> {
    let slot = b.extension_mut().take();
    let mut state = match slot.map(|e| e.downcast::<CpuJgs2>()) {
        Some(Ok(s)) => s,
        Some(Err(other)) => {
            *b.extension_mut() = Some(other);
            return Err(not_set_up());
        }
        None => return Err(not_set_up()),
    };
    let r = f(b, &mut state);
    *b.extension_mut() = Some(state);
    r
}

fn not_set_up() -> JelloError {
    JelloError::Solver("cpu backend: jgs2_setup was not called".into())
}

fn state_ref(b: &CpuBackend) -> Option<&CpuJgs2> {
    b.extension().as_deref().and_then(|e| e.downcast_ref())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl Jgs2Backend for CpuBackend {
    fn jgs2_num_colours(&self) -> usize {
        state_ref(self).map_or(0, |s| s.num_colours)
    }

    fn jgs2_plain_moves_filtered(&self, _problem: &StepProblem) -> bool {
        true
    }

    fn jgs2_eigen_cutoff(&self) -> f64 {
        1e-10
    }

    fn jgs2_begin(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        flags: Jgs2StepFlags,
        next: Next,
    ) -> Result<Jgs2Sample> {
        self.begin_step(problem, elastic)?;
        with_state(self, |b, s| {
            let n = problem.x_start.len();
            s.flags = flags;
            s.g = vec![0.0; n];
            s.prev = vec![0.0; n];
            s.dirs = [None, None, None];
            s.step = None;
            let (x, _) = b.points_mut();
            s.coarse = (s.coupling == ContactCoupling::Coarse
                && s.subspace.is_some()
                && problem.model.contact.is_some())
            .then(|| CoarseSpace::new(problem.model, x));
            // The iteration keeps the element cache and g current; the residual is then free.
            if s.plain_vbd() {
                element_gradient_pass(problem.model, x, &mut s.cache);
            } else {
                element_pass(problem.model, x, &mut s.cache, None);
            }
            s.contact = VertexContact::at(problem, x);
            s.gather_all(problem, x);
            let energy = flags.energy.then(|| problem.energy_change(elastic, x));
            Ok(s.sample(problem, x, next, energy, f64::INFINITY))
        })
    }

    fn jgs2_evaluate(
        &mut self,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Jgs2Sample> {
        with_state(self, |b, s| {
            let (x, _) = b.points_mut();
            let energy = s.flags.energy.then_some(s.energy);
            Ok(s.sample(problem, x, next, energy, f64::INFINITY))
        })
    }

    fn jgs2_plain(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample> {
        with_state(self, |b, s| {
            let (x, _) = b.points_mut();
            let moved = match s.variant {
                Variant::Jacobi => {
                    let d = s.jacobi_direction(problem, x, false);
                    for (xi, v) in x.iter_mut().zip(&d) {
                        *xi += v;
                    }
                    element_pass(problem.model, x, &mut s.cache, None);
                    s.contact = VertexContact::at(problem, x);
                    s.gather_all(problem, x);
                    d
                }
                Variant::GaussSeidel => {
                    let x0 = x.clone();
                    if s.plain_vbd() {
                        s.vbd_sweep(problem, x);
                    } else {
                        s.gauss_seidel_sweep(problem, x);
                    }
                    x.iter().zip(&x0).map(|(a, b)| a - b).collect()
                }
            };
            s.dirs = [None, None, None];
            let energy = s.flags.energy.then(|| problem.energy_change(elastic, x));
            Ok(s.sample(problem, x, Next::Plain, energy, max_vertex_norm(&moved)))
        })
    }

    fn jgs2_trial(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        coef: [f64; 3],
        scale: f64,
        next: Next,
    ) -> Result<Jgs2Trial> {
        with_state(self, |b, s| {
            let (x, trial) = b.points_mut();
            if s.step.as_ref().is_none_or(|(c, _, _)| *c != coef) {
                let mut step = vec![0.0; x.len()];
                for (c, d) in coef.iter().zip(&s.dirs) {
                    if let Some(d) = d {
                        for (v, di) in step.iter_mut().zip(d) {
                            *v += c * di;
                        }
                    }
                }
                // Obstacles only unless strict: the stable Neo-Hookean family, ARAP and
                // corotated models stay finite through inversion, and Neo-Hookean's +∞ for
                // J ≤ 0 fails the energy test. Newton's inversion trust region
                // (`StepProblem::step_limit`) slows JGS2 down: kicked armadillo_18k 19.4 → 28.8
                // iterations per step, with 30 kN 144 → 242. The strict retry of
                // `inversion = "forbid"` keeps every element positive.
                let bound = if problem.strict_inversion {
                    problem.max_step(x, &step)
                } else {
                    problem.max_obstacle_step(x, &step)
                };
                s.step = Some((coef, step, bound));
            }
            let (_, step, bound) = s.step.as_ref().expect("set above");
            let alpha = scale * bound;
            if alpha == 0.0 {
                trial.copy_from_slice(x);
            } else {
                for ((t, xi), v) in trial.iter_mut().zip(x.iter()).zip(step) {
                    *t = xi + alpha * v;
                }
            }
            let energy = problem.energy_change(elastic, trial);
            s.trial = (alpha, energy, next);
            Ok(Jgs2Trial {
                energy,
                bound: *bound,
            })
        })
    }

    fn jgs2_accept(
        &mut self,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample> {
        self.accept();
        with_state(self, |b, s| {
            let (x, _) = b.points_mut();
            let (alpha, energy, next) = s.trial;
            let (_, step, _) = s.step.take().ok_or_else(|| {
                JelloError::Solver("cpu backend: jgs2_accept without a trial".into())
            })?;
            if alpha == 0.0 {
                s.prev.iter_mut().for_each(|v| *v = 0.0);
            } else {
                for (p, v) in s.prev.iter_mut().zip(&step) {
                    *p = v * alpha;
                }
            }
            element_pass(problem.model, x, &mut s.cache, None);
            s.contact = VertexContact::at(problem, x);
            s.gather_all(problem, x);
            s.dirs = [None, None, None];
            let max_move = max_vertex_norm(&s.prev);
            Ok(s.sample(problem, x, next, Some(energy), max_move))
        })
    }

    fn jgs2_raise_stiffness(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        prev_min_sq: &mut f64,
        next: Next,
    ) -> Result<Option<Jgs2Sample>> {
        with_state(self, |b, s| {
            let (x, _) = b.points_mut();
            Ok(problem
                .raise_contact_stiffness(x, prev_min_sq)
                .then(|| s.reevaluate(problem, elastic, x, next)))
        })
    }

    fn jgs2_lag_friction(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Option<Jgs2Sample>> {
        with_state(self, |b, s| {
            let (x, _) = b.points_mut();
            Ok((problem.lag_friction(x) > 0).then(|| s.reevaluate(problem, elastic, x, next)))
        })
    }

    fn jgs2_slack(&self, problem: &StepProblem, elastic: &dyn ElasticTerms, e: f64) -> f64 {
        self.energy_slack(problem, elastic, e)
    }

    fn jgs2_current(&mut self, x: &mut Vec<f64>) -> Result<()> {
        x.clear();
        x.extend_from_slice(self.host_positions().expect("the CPU holds its positions"));
        Ok(())
    }

    fn jgs2_finish(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
    ) -> Result<()> {
        self.finish_step(problem, elastic, 0.0, x).map(|_| ())
    }
}

impl CpuJgs2 {
    /// Whether the iteration is plain VBD (coloured Gauss–Seidel, no subspace, no safeguard),
    /// which runs [`Self::vbd_sweep`] and keeps only the element gradients cached.
    fn plain_vbd(&self) -> bool {
        self.subspace.is_none() && self.variant == Variant::GaussSeidel && !self.flags.safeguard
    }

    /// The sample at `x` after the contact potential changed (κ raised, friction lagged
    /// again): contact terms, g, directions and energy change anew; the element cache stands.
    fn reevaluate(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &[f64],
        next: Next,
    ) -> Jgs2Sample {
        self.contact = VertexContact::at(problem, x);
        self.gather_all(problem, x);
        self.dirs = [None, None, None];
        let energy = self.flags.energy.then(|| problem.energy_change(elastic, x));
        self.sample(problem, x, next, energy, f64::INFINITY)
    }

    /// The sample at `x` (element cache and g current there) with the directions `next` asks
    /// for (those already computed at `x` are kept).
    fn sample(
        &mut self,
        problem: &StepProblem,
        x: &[f64],
        next: Next,
        energy: Option<f64>,
        max_move: f64,
    ) -> Jgs2Sample {
        let mut out = Jgs2Sample {
            residual: problem.model.char_norm.residual(&self.g),
            energy: energy.unwrap_or(0.0),
            max_move,
            finite: x.iter().all(|v| v.is_finite()),
            ..Jgs2Sample::default()
        };
        self.energy = out.energy;
        if next == Next::Plain {
            return out;
        }
        if self.dirs[0].is_none() {
            self.dirs[0] = Some(self.primary_direction(problem, x));
        }
        if next == Next::Model {
            if self.subspace.is_some() && self.dirs[1].is_none() {
                let mut d = self.jacobi_direction(problem, x, true);
                if let Some(space) = &self.coarse {
                    let pairs = self.contact.iter().flat_map(|c| c.blocks());
                    let a = space.operator(problem, &self.cache, x, pairs);
                    for (di, ci) in d.iter_mut().zip(space.correction(a, &self.g)) {
                        *di += ci;
                    }
                }
                self.dirs[1] = Some(d);
            }
            self.dirs[2] = self
                .prev
                .iter()
                .any(|&v| v != 0.0)
                .then(|| self.prev.clone());
        }
        let dirs: Vec<(usize, &Vec<f64>)> = self
            .dirs
            .iter()
            .enumerate()
            .filter_map(|(k, d)| d.as_ref().map(|d| (k, d)))
            .collect();
        for &(k, d) in &dirs {
            out.present[k] = true;
            out.gd[k] = dot(&self.g, d);
        }
        if next == Next::Model {
            let hd: Vec<Vec<f64>> = dirs
                .iter()
                .map(|(_, d)| {
                    let mut hd = hess_vec(problem, &self.cache, &self.vertex_tets, x, d);
                    if let Some(c) = &self.contact {
                        c.add_hess_vec(problem, d, &mut hd);
                    }
                    hd
                })
                .collect();
            for (p, &(kp, dp)) in dirs.iter().enumerate() {
                for (q, &(kq, dq)) in dirs.iter().enumerate() {
                    out.dhd[kp][kq] = 0.5 * (dot(dp, &hd[q]) + dot(dq, &hd[p]));
                }
            }
        }
        out
    }

    /// The primary direction at `x`: every free vertex's JGS2 (or VBD) step (Jacobi), or the
    /// displacement of a whole Gauss–Seidel sweep from `x`, run on a copy (a colour on its own
    /// may raise E a lot: its subspace assumes the other colours follow, which they do only
    /// later in the sweep).
    fn primary_direction(&mut self, problem: &StepProblem, x: &[f64]) -> Vec<f64> {
        match self.variant {
            Variant::Jacobi => self.jacobi_direction(problem, x, false),
            Variant::GaussSeidel => {
                let (g0, cache0) = (self.g.clone(), self.cache.clone());
                let contact0 = self.contact.clone();
                let mut xs = x.to_vec();
                self.gauss_seidel_sweep(problem, &mut xs);
                self.g = g0;
                self.cache = cache0;
                self.contact = contact0;
                xs.iter().zip(x).map(|(a, b)| a - b).collect()
            }
        }
    }

    /// The co-rotation of every vertex's subspace at `x`: the polar rotation of its elements'
    /// mean F, relative to the linearisation state's.
    fn frames(&self, model: &Model, x: &[f64]) -> Vec<Matrix3<f64>> {
        let mut rot = rotations(model, x, &self.vertex_tets);
        if let Some(origin) = &self.origin {
            for (r, o) in rot.iter_mut().zip(origin) {
                *r *= o.transpose();
            }
        }
        rot
    }

    /// Local steps of `group` at `x` with the assembled gradient: JGS2 (or VBD without a
    /// subspace, or with `vbd`), each limited so the vertex cannot cross an obstacle. `rot`:
    /// the per-vertex rotations to use (computed at `x` when `None`).
    fn local_steps(
        &self,
        problem: &StepProblem,
        x: &[f64],
        group: &[u32],
        vbd: bool,
        rot: Option<&[Matrix3<f64>]>,
    ) -> Vec<Vector3<f64>> {
        let model = problem.model;
        let g = &self.g;
        let frame = self.subspace.as_ref().filter(|_| !vbd).map(|s| {
            let rot = match rot {
                Some(r) => r.to_vec(),
                None => self.frames(model, x),
            };
            let mut tf = rest_frame_gradients(g, Some(&rot), &s.tree, &s.rest);
            if let Some(far) = &s.far_hmatrix {
                hmatrix_far_field(&mut tf, &s.tree, far);
            }
            (s, rot, tf)
        });
        let contact = self.contact.as_ref();
        let mut steps: Vec<Vector3<f64>> = group
            .par_iter()
            .map(|&i| {
                let i = i as usize;
                let with_contact = |(a, r): (Matrix3<f64>, Vector3<f64>)| match contact {
                    Some(c) => (a + c.diag_of(i), r),
                    None => (a, r),
                };
                let vbd_sys =
                    || with_contact(vbd_system(problem, &self.cache, &self.vertex_tets, x, g, i));
                let (a, r) = match &frame {
                    None => vbd_sys(),
                    Some((s, rot, tf)) => {
                        let own = jgs2_system(
                            problem,
                            &self.cache,
                            &self.vertex_tets,
                            x,
                            g,
                            Some(rot),
                            tf,
                            i,
                            &s.vertices[i],
                        );
                        match contact.filter(|_| self.coupling == ContactCoupling::Extended) {
                            Some(c) => self.coupled(problem, x, c, i, own),
                            None => with_contact(own),
                        }
                    }
                };
                // A is SPD by construction (PSD element terms + an SPD rest Schur complement);
                // should round-off break that, the vertex falls back to its VBD step.
                let d = solve_spd(&a, &r).or_else(|| {
                    let (a, r) = vbd_sys();
                    solve_spd(&a, &r)
                });
                let d = filter(problem, x, i, d.unwrap_or_else(Vector3::zeros));
                if problem.strict_inversion {
                    keep_oriented(problem, &self.vertex_tets, x, i, d)
                } else {
                    d
                }
            })
            .collect();
        // VBD's steps are Newton steps on each vertex's local energy: searched on it.
        let local_search = frame.is_none();
        filter_group(
            problem,
            &self.vertex_tets,
            x,
            group,
            &mut steps,
            local_search,
        );
        steps
    }

    /// Vertex `i`'s JGS2 system `own` (contact left out) with its perturbation extended to
    /// the vertices it touches on other bodies ([`ContactCoupling::Extended`]; contact.rs
    /// module docs): each partner j moving by the same δ adds its own block-Jacobi system
    /// (inertia, incident elements, obstacle barriers; `r` the assembled g_j, contact
    /// included), and the pair blocks add their curvature along the shared move. Without
    /// partners, the held system.
    fn coupled(
        &self,
        problem: &StepProblem,
        x: &[f64],
        c: &VertexContact,
        i: usize,
        (a, r): (Matrix3<f64>, Vector3<f64>),
    ) -> (Matrix3<f64>, Vector3<f64>) {
        let mut set: Vec<u32> = c.partners_of(i).collect();
        if set.is_empty() {
            return (a + c.diag_of(i), r);
        }
        let (mut a, mut r) = (a, r);
        for &j in &set {
            let (aj, rj) = vbd_system(
                problem,
                &self.cache,
                &self.vertex_tets,
                x,
                &self.g,
                j as usize,
            );
            a += aj;
            r += rj;
        }
        let k = set.partition_point(|&v| (v as usize) < i);
        set.insert(k, i as u32);
        (a + c.shared_block(&set), r)
    }

    /// Refreshes the assembled gradient at `vertices` from the element cache.
    fn gather(&mut self, problem: &StepProblem, x: &[f64], vertices: &[u32]) {
        let contact = self.contact.as_ref();
        let vals: Vec<Vector3<f64>> = vertices
            .par_iter()
            .map(|&v| {
                let v = v as usize;
                let g = vertex_gradient(problem, &self.cache, &self.vertex_tets, x, v);
                contact.map_or(g, |c| g + c.grad_of(v))
            })
            .collect();
        for (&v, val) in vertices.iter().zip(vals) {
            self.g[3 * v as usize..3 * v as usize + 3].copy_from_slice(val.as_slice());
        }
    }

    /// Refreshes the assembled gradient at every vertex from the element cache, in place.
    fn gather_all(&mut self, problem: &StepProblem, x: &[f64]) {
        let (cache, vt, contact) = (&self.cache, &self.vertex_tets, self.contact.as_ref());
        let one = |(v, out): (usize, &mut [f64])| {
            let val = vertex_gradient(problem, cache, vt, x, v);
            let val = contact.map_or(val, |c| val + c.grad_of(v));
            out.copy_from_slice(val.as_slice());
        };
        if self.g.len() < 3 * SEQUENTIAL_BELOW {
            self.g.chunks_mut(3).enumerate().for_each(one);
        } else {
            self.g.par_chunks_mut(3).enumerate().for_each(one);
        }
    }

    /// The Jacobi direction: every free vertex's local step at `x`, scattered into 3n.
    fn jacobi_direction(&self, problem: &StepProblem, x: &[f64], vbd: bool) -> Vec<f64> {
        let mut d = vec![0.0; x.len()];
        for (&i, s) in self
            .free
            .iter()
            .zip(self.local_steps(problem, x, &self.free, vbd, None))
        {
            d[3 * i as usize..3 * i as usize + 3].copy_from_slice(s.as_slice());
        }
        d
    }

    /// One plain VBD sweep from `x` (Chen et al. 2024, Alg. 1): colour by colour, every vertex of
    /// the colour solves its 3×3 system with its incident elements evaluated on the spot at
    /// the current positions ([`vbd_local_system`]: the corner's gradient rows and diagonal
    /// block only), and moves. When written it was the same iterate as
    /// [`Self::gauss_seidel_sweep`] up to round-off (residual after 50 iterations on
    /// armadillo_18k equal to 12 digits; see below for the exact blocks that followed), which
    /// re-evaluated each touched element's full 12×12
    /// Hessian after every colour, then sorted and regathered: 87–90% of a VBD iteration's
    /// instructions were that element pass, ~13% the sorting, 7% copying (callgrind,
    /// armadillo_18k, `benches/cpu_iteration.rs`); 1.09 → 0.40 G instructions per iteration.
    /// Afterwards the element gradients and `g` are refreshed at the new `x` for the residual
    /// (one gradient-only pass).
    ///
    /// Since then the gradient-only pass takes P from the invariants (no SVD) and the corner
    /// skips the σ-space eigen-solve wherever no scaling mode is clamped (`perf record`: that
    /// solve was 59% of an iteration; 34.7 → 22.1 ms at 2 threads). Then the SVD's own Jacobi
    /// eigen-solve of FᵀF was 60% of an iteration, and for the stable Neo-Hookeans the corner
    /// needs no SVD at all: their exact diagonal block is PSD at every F
    /// ([`crate::material::stress_and_exact_block`]), so plain VBD now takes the true local
    /// Newton step with it instead of the corner of the projected element Hessian (which is
    /// larger by the clamped flip/twist modes' |λ|; 50-iteration residual on armadillo_18k
    /// 1.4863e-6 → 1.4861e-6; `docs/src/benchmarks/cpu-speed.md` for the times). The cached route
    /// ([`Self::gauss_seidel_sweep`]: safeguarded or Jacobi VBD, JGS2's fallback) keeps the
    /// projected blocks, because the same cached Hessians feed the safeguard's curvature.
    fn vbd_sweep(&mut self, problem: &StepProblem, x: &mut [f64]) {
        let mut steps = std::mem::take(&mut self.steps_buf);
        for group in &self.colour_free {
            steps.clear();
            steps.resize(group.len(), Vector3::zeros());
            let xr: &[f64] = x;
            let vt = &self.vertex_tets;
            // Contact terms at this colour's start: the previous colours moved their partners.
            let contact = VertexContact::at(problem, xr);
            let solve = |(&i, out): (&u32, &mut Vector3<f64>)| {
                let i = i as usize;
                let (a, r) = vbd_local_system(problem, vt, xr, i);
                let (a, r) = match &contact {
                    Some(c) => (a + c.diag_of(i), r + c.grad_of(i)),
                    None => (a, r),
                };
                let d = filter(
                    problem,
                    xr,
                    i,
                    solve_spd(&a, &r).unwrap_or_else(Vector3::zeros),
                );
                *out = if problem.strict_inversion {
                    keep_oriented(problem, vt, xr, i, d)
                } else {
                    d
                };
            };
            // Each vertex's step depends on x only, so either order gives the same bits.
            if group.len() < SEQUENTIAL_BELOW {
                group.iter().zip(steps.iter_mut()).for_each(solve);
            } else {
                group.par_iter().zip(steps.par_iter_mut()).for_each(solve);
            }
            filter_group(problem, vt, xr, group, &mut steps, true);
            for (&i, d) in group.iter().zip(&steps) {
                for k in 0..3 {
                    x[3 * i as usize + k] += d[k];
                }
            }
        }
        self.steps_buf = steps;
        element_gradient_pass(problem.model, x, &mut self.cache);
        self.contact = VertexContact::at(problem, x);
        self.gather_all(problem, x);
    }

    /// One Gauss–Seidel sweep from `x`: colour by colour, each colour's local steps at the
    /// current iterate, applied at once; the element cache and g follow the moved vertices.
    fn gauss_seidel_sweep(&mut self, problem: &StepProblem, x: &mut [f64]) {
        let model = problem.model;
        // Rotations once per sweep, at the sweep's start (the paper's R^k): refreshing them per
        // colour let early colours' large moves re-rotate later colours' subspaces, and the
        // sweep took 63 instead of 29 iterations on a stiff beam (tests/cpu/jgs2.rs).
        let rot = self.subspace.is_some().then(|| self.frames(model, x));
        for c in 0..self.colour_free.len() {
            let group = self.colour_free[c].clone();
            let steps = self.local_steps(problem, x, &group, false, rot.as_deref());
            for (&i, d) in group.iter().zip(&steps) {
                for k in 0..3 {
                    x[3 * i as usize + k] += d[k];
                }
            }
            // Refresh the elements touching the moved vertices and the gradient at their
            // corners.
            let mut touched: Vec<u32> = group
                .iter()
                .flat_map(|&i| self.vertex_tets.of(i as usize).map(|(t, _)| t))
                .collect();
            touched.sort_unstable();
            touched.dedup();
            element_pass(model, x, &mut self.cache, Some(&touched));
            let mut verts: Vec<u32> = touched
                .iter()
                .flat_map(|&t| model.mesh.tets[t as usize])
                .collect();
            // Contact: the vertices of the pairs active before and after the move (partners
            // on other bodies included) see a changed contact gradient.
            if let Some(before) = self.contact.take() {
                verts.extend_from_slice(before.touched());
                self.contact = VertexContact::at(problem, x);
                verts.extend(
                    self.contact
                        .iter()
                        .flat_map(|c| c.touched().iter().copied()),
                );
            }
            verts.sort_unstable();
            verts.dedup();
            self.gather(problem, x, &verts);
        }
    }
}

/// `A⁻¹ r` negated when A is SPD and the result finite.
fn solve_spd(a: &Matrix3<f64>, r: &Vector3<f64>) -> Option<Vector3<f64>> {
    let d = -a.cholesky()?.solve(r);
    d.iter().all(|v| v.is_finite()).then_some(d)
}

/// Limits a vertex's step so neither it (0.9 × time of impact) nor one of its surface
/// triangles ([`StepProblem::vertex_surface_step`]) can cross an obstacle.
fn filter(problem: &StepProblem, x: &[f64], i: usize, d: Vector3<f64>) -> Vector3<f64> {
    let p = Vector3::from_column_slice(&x[3 * i..3 * i + 3]);
    let mut alpha = 1.0f64;
    for o in &problem.model.obstacles {
        let toi = o.time_of_impact(&p, &d);
        if toi < 1.0 {
            alpha = alpha.min(0.9 * toi);
        }
    }
    d * alpha.min(problem.vertex_surface_step(x, i, &(d * alpha)) * alpha)
}

/// Limits vertex `i`'s move `d` so that every incident element positive at `x` stays above its
/// strict floor ([`strict_volume_floor`]; the other corners held): each element's volume is
/// affine in the vertex's position, so the bound is exact.
fn keep_oriented(
    problem: &StepProblem,
    vertex_tets: &VertexTets,
    x: &[f64],
    i: usize,
    d: Vector3<f64>,
) -> Vector3<f64> {
    let tets = &problem.model.mesh.tets;
    let mut alpha = 1.0f64;
    for (t, local) in vertex_tets.of(i) {
        let tet = tets[t as usize];
        let p =
            |a: usize| Vector3::from_column_slice(&x[3 * tet[a] as usize..3 * tet[a] as usize + 3]);
        // 6V = (p_b − p_a)·((p_c − p_a) × (p_d − p_a)); its gradient with respect to corner
        // `local` is the area normal of the opposite face, pointing toward the corner.
        let [a, b, c, e] = [0, 1, 2, 3].map(p);
        let vol = (b - a).dot(&(c - a).cross(&(e - a)));
        if vol <= 0.0 {
            continue;
        }
        let six_rest = 6.0 * problem.model.rest[t as usize].volume;
        let floor = strict_volume_floor(vol / six_rest) * six_rest;
        let gb = (c - a).cross(&(e - a));
        let gc = (e - a).cross(&(b - a));
        let ge = (b - a).cross(&(c - a));
        let grad = match local {
            0 => -(gb + gc + ge),
            1 => gb,
            2 => gc,
            _ => ge,
        };
        let rate = grad.dot(&d);
        if rate < 0.0 {
            alpha = alpha.min(((vol - floor) / -rate).max(0.0));
        }
    }
    d * alpha.min(1.0)
}
