//! The JGS2 / VBD step, written once over [`Jgs2Backend`]: the stop test, the plain
//! iteration, [`Safeguard::Cut`]'s plain trial, the quadratic-model step
//! ([`model_coefficients`]) and its Armijo backtracking. The per-vertex work (local systems,
//! sweeps, directions, Hessian products) is the backend's; the f64 CPU reference is
//! `Jgs2Solver<CpuBackend>` (`cpu.rs`).
//!
//! Edge cases the loop decides once for every backend: a model step that is not a descent
//! direction (or whose slope is not finite) stays put; the backtracking evaluates up to 31
//! trials (α halved 30 times) and takes the last, unless its energy is not finite, when it stays
//! put; a non-finite residual or position is an error.

use super::backend::{model_coefficients, Jgs2Backend, Jgs2Setup, Jgs2StepFlags, Next};
use super::local::rotations;
use super::subspace::Jgs2Subspace;
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::mesh::VertexTets;
use crate::problem::{ElasticTerms, Model, StepProblem};
use crate::solver::backend::CpuBackend;
use crate::solver::report::ms;
use crate::solver::{IterationRecord, StepReport, StepSolver, StepTimings, StepWork, StopRule};
use std::sync::Arc;

/// How vertices are swept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// All vertices in parallel from the same iterate (double-buffered).
    Jacobi,
    /// Colour by colour (vertices of a colour share no tet), each colour seeing the updates of
    /// the previous ones.
    GaussSeidel,
}

/// Parameters of JGS2 / VBD.
#[derive(Clone, Copy, Debug)]
pub struct Jgs2Params {
    /// Stop rule (default: characteristic norm ε = 1e-5; the paper uses Dx 1e-3).
    pub stop: StopRule,
    /// Iteration cap per step (default 1000).
    pub max_iterations: usize,
    /// Sweep order.
    pub variant: Variant,
    /// How each iteration is guarded against steps that raise the energy (default
    /// [`Safeguard::Cut`]; VBD in `jello run` uses [`Safeguard::Off`]).
    pub safeguard: Safeguard,
}

/// How JGS2 / VBD guard an iteration against steps that raise the energy
/// (`Jgs2Params::safeguard`). The primary direction δ is the Jacobi step of every vertex
/// (Jacobi) or the whole coloured sweep's displacement (Gauss–Seidel).
///
/// Measured (the module docs, "Safeguard"): on moderate motion the plain step passes the
/// energy test at every iteration and the model's coefficients are ≈ (1, 0, 0), so
/// [`Safeguard::Always`] costs +15–25% per iteration for the same iterates; on violent steps
/// (a 3 kN kick, a stiff drag) the plain iteration diverges and the model keeps it convergent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Safeguard {
    /// The paper's plain iteration, x += δ: no energy test (diverges on violent steps).
    Off,
    /// Every iteration takes the step minimising the quadratic model of E over
    /// span{δ, block-Jacobi (VBD) step, previous step} (three Hessian-vector products and a
    /// 3×3 solve), limited by the obstacle/inversion filter and backtracked (Armijo) on the
    /// true energy.
    Always,
    /// The default: the plain step δ, limited by the same filter, is kept when it passes the
    /// same Armijo test and the parabola through the energies along it puts the minimiser
    /// within 0.9–1.1 of its length ([`plain_step_fits`]; one energy evaluation, the energy
    /// at the iterate being the previous trial's). From its first rejection in a time step
    /// on, every iteration of that step takes [`Safeguard::Always`]'s model step (a violent
    /// step stays violent, and on the device a rejected plain trial costs a re-evaluation of
    /// the iterate).
    #[default]
    Cut,
}

impl Safeguard {
    /// Whether iterates are tested on the energy at all.
    pub fn is_on(self) -> bool {
        self != Safeguard::Off
    }
}

impl Default for Jgs2Params {
    fn default() -> Self {
        Jgs2Params {
            stop: StopRule::default(),
            max_iterations: 1000,
            variant: Variant::Jacobi,
            safeguard: Safeguard::Cut,
        }
    }
}

/// What [`Jgs2Solver::with_iterate_observer`] calls: iteration k (1, 2, …) of a step and its
/// accepted iterate (3n, m).
pub type IterateObserver = Box<dyn FnMut(usize, &[f64]) + Send>;

/// JGS2 (with a subspace) or VBD (without) on a backend (f64 CPU by default).
pub struct Jgs2Solver<B: Jgs2Backend = CpuBackend> {
    params: Jgs2Params,
    backend: B,
    has_subspace: bool,
    /// The model's largest extent (m), the scale of the step-size stop test.
    extent: f64,
    observer: Option<IterateObserver>,
}

impl Jgs2Solver<CpuBackend> {
    /// VBD: no subspace (plain per-vertex Newton on inertia + incident elements), f64 CPU.
    pub fn vbd(model: &Model, params: Jgs2Params) -> Self {
        Self::cpu(model, params, None, None)
    }

    /// JGS2 with a precomputed subspace for this model and h (the same per-vertex subspaces
    /// serve Jacobi and Gauss–Seidel), f64 CPU.
    pub fn jgs2(model: &Model, params: Jgs2Params, subspace: Arc<Jgs2Subspace>) -> Result<Self> {
        check_subspace(model, &subspace)?;
        Ok(Self::cpu(model, params, Some(subspace), None))
    }

    fn cpu(
        model: &Model,
        params: Jgs2Params,
        subspace: Option<Arc<Jgs2Subspace>>,
        origin: Option<Vec<nalgebra::Matrix3<f64>>>,
    ) -> Self {
        let mut backend = CpuBackend::new(model.num_vertices());
        let has_subspace = subspace.is_some();
        let setup = Jgs2Setup {
            variant: params.variant,
            subspace,
            origin,
        };
        super::cpu::setup(&mut backend, model, setup);
        Jgs2Solver::from_backend(model, backend, params, has_subspace)
    }

    /// Sets how a vertex in IPC contact sees the vertices it touches on other bodies
    /// ([`super::ContactCoupling`]; default [`super::ContactCoupling::Held`]). JGS2 only: VBD's
    /// steps and the device keep the partners held.
    pub fn with_contact_coupling(mut self, coupling: super::ContactCoupling) -> Self {
        super::cpu::set_coupling(&mut self.backend, coupling);
        self
    }

    /// Declares that the subspace was built at the deformed positions `x`
    /// ([`super::build_subspace_at`]): rotations are then taken relative to those at `x`.
    /// A diagnostic of the f64 reference; [`super::DeviceJgs2`] always co-rotates from the rest
    /// shape.
    pub fn linearised_at(mut self, model: &Model, x: &[f64]) -> Self {
        let origin = rotations(model, x, &VertexTets::new(&model.mesh));
        super::cpu::set_origin(&mut self.backend, origin);
        self
    }
}

/// The error for a subspace built for another model.
fn check_subspace(model: &Model, subspace: &Jgs2Subspace) -> Result<()> {
    if subspace.vertices.len() != model.num_vertices() {
        return Err(JelloError::Solver(
            "JGS2 subspace does not match the model".into(),
        ));
    }
    Ok(())
}

impl<B: Jgs2Backend> Jgs2Solver<B> {
    /// The solver over `backend`, already set up for `model`.
    pub(super) fn from_backend(
        model: &Model,
        backend: B,
        params: Jgs2Params,
        has_subspace: bool,
    ) -> Self {
        Jgs2Solver {
            params,
            backend,
            has_subspace,
            extent: model.largest_extent(),
            observer: None,
        }
    }

    /// Calls `observer(k, x)` after every iteration k of every step with the accepted iterate
    /// x (3n, m; read back from a device, one readback per iteration). For checks that every
    /// iterate keeps an invariant (no intersection, no inversion) in one run, where a run capped
    /// at each k would repeat the first k − 1 iterations; it does not change the iterates.
    pub fn with_iterate_observer(
        mut self,
        observer: impl FnMut(usize, &[f64]) + Send + 'static,
    ) -> Self {
        self.observer = Some(Box::new(observer));
        self
    }

    /// Number of vertex colours (Gauss–Seidel sweeps per iteration).
    pub fn num_colours(&self) -> usize {
        self.backend.jgs2_num_colours()
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, mutably (for its own inspection methods).
    pub(crate) fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }
}

/// The window of [`plain_step_fits`]: the plain step is kept when the minimiser of the
/// quadratic through the energies along it lies within this factor range of its length.
pub const PLAIN_STEP_WINDOW: (f64, f64) = (0.9, 1.1);

/// [`Safeguard::Cut`]'s test of a plain step of length `alpha` (along δ, slope `slope` = gᵀδ
/// < 0) that took the energy change from `e0` to `e1`, with round-off allowance `slack`: it
/// passes Armijo (`e1 ≤ e0 + 1e-4·α·slope + slack`), and the parabola through
/// (0, e0, slope) and (α, e1) has its minimiser within [`PLAIN_STEP_WINDOW`] × α — unless the
/// parabola's curvature term is within 10× the round-off allowance (a converged step, where
/// the fit is noise). Free: it uses the energies the test evaluates anyway.
///
/// Why the length test: on the drag scene the plain step passes Armijo at every iteration,
/// but from the fourth time step on it starts 1.2–1.4× too long (the fit's minimiser at
/// 0.70–0.85 of it), and x += δ then needs 7–8 iterations per step where the model step
/// (coefficient 0.58 on δ, the rest on the block-Jacobi and previous steps) needs 5–6.
/// Measured (armadillo_18k, Δx∞ 1e-4, 5 steps, iterations per step): Armijo alone 5.00 /
/// 2.40 / 2.60 (drag / twist / spin), window 0.8–1.25 4.60 / 2.40 / 2.60, window 0.9–1.1
/// 4.20 / 2.40 / 2.60; `Safeguard::Always` 4.20 / 2.40 / 2.80.
pub fn plain_step_fits(e0: f64, e1: f64, alpha: f64, slope: f64, slack: f64) -> bool {
    if !(e1.is_finite() && slope < 0.0 && alpha > 0.0 && e1 <= e0 + 1e-4 * alpha * slope + slack) {
        return false;
    }
    let curv = e1 - e0 - alpha * slope;
    if curv.abs() <= 10.0 * slack {
        return true;
    }
    // E(t·α) ≈ e0 + t·α·slope + t²·curv: minimiser t* = −α·slope / (2·curv).
    let t = -alpha * slope / (2.0 * curv);
    curv > 0.0 && (PLAIN_STEP_WINDOW.0..=PLAIN_STEP_WINDOW.1).contains(&t)
}

/// The name of a JGS2 (with a subspace) or VBD solver in reports — shared with
/// [`super::DeviceJgs2`].
pub(super) fn solver_name(has_subspace: bool, variant: Variant) -> String {
    match (has_subspace, variant) {
        (true, Variant::Jacobi) => "jgs2-jacobi".into(),
        (true, Variant::GaussSeidel) => "jgs2-gs".into(),
        (false, Variant::Jacobi) => "vbd-jacobi".into(),
        (false, Variant::GaussSeidel) => "vbd".into(),
    }
}

impl<B: Jgs2Backend> StepSolver for Jgs2Solver<B> {
    fn name(&self) -> String {
        solver_name(self.has_subspace, self.params.variant)
    }

    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> Result<StepReport> {
        let start = Instant::now();
        let mut timings = StepTimings::default();
        let b = &mut self.backend;
        // A backend without the per-vertex strict or IPC filters keeps elements above the
        // floor through the energy test and surfaces apart through the combined step's CCD,
        // so every iterate goes through the safeguard under it.
        let mode = match self.params.safeguard {
            Safeguard::Off if !b.jgs2_plain_moves_filtered(problem) => Safeguard::Always,
            m => m,
        };
        let safeguard = mode.is_on();
        // `Safeguard::Cut`: the model step from the first rejected plain step of this time
        // step on; `Always`: from the start.
        let mut model_on = mode == Safeguard::Always;
        let next = |model_on: bool| match (safeguard, model_on) {
            (false, _) => Next::Plain,
            (true, false) => Next::Primary,
            (true, true) => Next::Model,
        };
        let t0 = Instant::now();
        let flags = Jgs2StepFlags {
            safeguard,
            energy: safeguard || trace,
        };
        // IPC, as Newton: κ balanced at the start from the f64 elastic terms, friction lagged at
        // xᵗ, further lagging passes at each converged point, κ raised as the gap shrinks (all
        // no-ops without contact).
        let contact = problem.model.contact.is_some();
        let mut passes_left = problem.begin_contact_step(problem.model);
        let mut min_gap_sq = f64::INFINITY;
        let mut s = b.jgs2_begin(problem, elastic, flags, next(model_on))?;
        timings.assembly_ms += ms(t0);
        let cutoff = b.jgs2_eigen_cutoff();
        let mut records = trace.then(Vec::new);
        if let Some(r) = records.as_mut() {
            r.push(IterationRecord {
                residual: s.residual,
                energy: s.energy,
                alpha: 1.0,
                ..IterationRecord::default()
            });
        }
        let mut iterations = 0;
        // Trial points evaluated (the safeguard's plain trial and every backtracking trial):
        // each is one evaluation of the state, and on a device one plan and one readback.
        let mut trials = 0;
        let mut converged;
        let mut max_dx = f64::INFINITY;
        loop {
            converged = self.params.stop.met(s.residual, max_dx / self.extent);
            if converged && iterations > 0 && passes_left > 0 {
                // Another lagging pass: friction's normal forces and frames from this point.
                passes_left -= 1;
                if let Some(relagged) = b.jgs2_lag_friction(problem, elastic, next(model_on))? {
                    s = relagged;
                    // Dx needs a step under the new potential; CN can stop at once.
                    max_dx = f64::INFINITY;
                    converged = self.params.stop.met(s.residual, max_dx);
                }
            }
            if StopRule::stop_now(converged, iterations, self.params.max_iterations) {
                break;
            }
            iterations += 1;
            let t0 = Instant::now();
            let mut alpha_it = 1.0;
            let mut plain_kept = false;
            if safeguard && !model_on {
                // The cut safeguard's plain trial: the primary step, limited by the step
                // filter, kept when it passes `plain_step_fits`.
                let slope = s.gd[0];
                if slope < 0.0 && slope.is_finite() {
                    let t = b.jgs2_trial(problem, elastic, [1.0, 0.0, 0.0], 1.0, Next::Primary)?;
                    trials += 1;
                    let slack = b.jgs2_slack(problem, elastic, s.energy);
                    if plain_step_fits(s.energy, t.energy, t.bound, slope, slack) {
                        plain_kept = true;
                        alpha_it = t.bound;
                        s = b.jgs2_accept(problem, elastic)?;
                    }
                }
                if !plain_kept {
                    // Rejected: the model step for the rest of the step, from the current
                    // point evaluated again with the model's directions.
                    model_on = true;
                    s = b.jgs2_evaluate(problem, elastic, Next::Model)?;
                }
            }
            if safeguard && !plain_kept {
                // The step minimising the quadratic model over span{primary, block-Jacobi,
                // previous}, limited by the step filter and backtracked (Armijo on the energy
                // change, with the backend's round-off allowance).
                let mut coef = model_coefficients(&s, cutoff);
                let slope: f64 = (0..3)
                    .filter(|&k| s.present[k])
                    .map(|k| coef[k] * s.gd[k])
                    .sum();
                let descent = slope < 0.0 && slope.is_finite();
                if !descent {
                    coef = [0.0; 3];
                }
                let mut scale = if descent { 1.0 } else { 0.0 };
                let mut t = b.jgs2_trial(problem, elastic, coef, scale, Next::Model)?;
                trials += 1;
                if descent {
                    let tl = Instant::now();
                    let e0 = s.energy;
                    let slack = b.jgs2_slack(problem, elastic, e0);
                    let mut tries = 1;
                    while !(t.energy.is_finite()
                        && t.energy <= e0 + 1e-4 * (scale * t.bound) * slope + slack)
                    {
                        scale *= 0.5;
                        t = b.jgs2_trial(problem, elastic, coef, scale, Next::Model)?;
                        trials += 1;
                        if tries == 30 {
                            break;
                        }
                        tries += 1;
                    }
                    if !t.energy.is_finite() {
                        // Even the last halving is infeasible (a barrier, or an element below
                        // the strict floor): stay put rather than step into it.
                        scale = 0.0;
                        t = b.jgs2_trial(problem, elastic, coef, scale, Next::Model)?;
                        trials += 1;
                    }
                    timings.line_search_ms += ms(tl);
                }
                alpha_it = scale * t.bound;
                s = b.jgs2_accept(problem, elastic)?;
            } else if !safeguard {
                s = b.jgs2_plain(problem, elastic)?;
            }
            max_dx = s.max_move;
            if contact {
                if let Some(raised) =
                    b.jgs2_raise_stiffness(problem, elastic, &mut min_gap_sq, next(model_on))?
                {
                    // κ doubled: the same point under the new potential.
                    s = raised;
                }
            }
            timings.solve_ms += ms(t0);
            if !s.residual.is_finite() || !s.finite {
                return Err(JelloError::Solver(format!(
                    "{} diverged (non-finite positions)",
                    solver_name(self.has_subspace, self.params.variant)
                )));
            }
            if let Some(r) = records.as_mut() {
                r.push(IterationRecord {
                    residual: s.residual,
                    energy: s.energy,
                    alpha: alpha_it,
                    model_step: safeguard.then_some(!plain_kept),
                    ..IterationRecord::default()
                });
            }
            if let Some(observe) = self.observer.as_mut() {
                b.jgs2_current(x)?;
                observe(iterations, x);
            }
        }
        b.jgs2_finish(problem, elastic, x)?;
        if x.iter().any(|v| !v.is_finite()) {
            return Err(JelloError::Solver(format!(
                "{} diverged (non-finite positions)",
                solver_name(self.has_subspace, self.params.variant)
            )));
        }
        Ok(StepReport {
            iterations,
            converged,
            residual: s.residual,
            energy: problem.energy(elastic, x),
            energy_change: problem.energy_change(elastic, x),
            wall_ms: ms(start),
            timings,
            work: StepWork {
                line_search_trials: trials,
                ..StepWork::default()
            },
            trace: records,
            ..StepReport::default()
        })
    }
}
