//! Time stepping: a [`Simulation`] owns a model, its state and a solver, and advances by
//! implicit-Euler or BDF2 steps (the model's [`crate::problem::Integrator`]) or static load
//! increments, checking every accepted step against the model's physical invariants.

use crate::clock::Instant;
use crate::contact::friction::FrictionSet;
use crate::contact::CrossingWatch;
use crate::error::{JelloError, Result};
use crate::problem::{
    ElasticTerms, History, InversionPolicy, Model, Script, State, StateCheck, StepProblem,
    StepScheme,
};
use crate::solver::pd::PinCarry;
use crate::solver::{StepReport, StepSolver, StepWork};
use std::sync::Arc;

/// Substep counts tried, in order, when a step under `inversion = "forbid"` cannot keep every
/// element positive at the full step (after the strict retry at the full step).
pub const FORBID_SUBSTEPS: [usize; 3] = [2, 4, 8];

/// What a [`Simulation`] is built with besides its model, state, time step and solver
/// ([`Simulation::with_options`]); the default is a dynamic run on the solver alone.
#[derive(Default)]
pub struct SimOptions {
    /// `Some(n)`: a static solve in `n` ≥ 1 load increments — step k applies k/n of the loads,
    /// with no inertia ([`StepProblem::new_static`]); the state's velocities are zeroed.
    pub static_increments: Option<usize>,
    /// The solver for the strict retries of `inversion = "forbid"` (the strict solve and its
    /// substeps): the f64 reference of a solver whose own iteration cannot keep every element
    /// above the strict floor — the device JGS2/VBD, whose f32 kernels have no such filter.
    /// Ordinary steps still run on the primary solver. `None`: the primary solver.
    pub strict_solver: Option<Box<dyn StepSolver>>,
    /// Evaluates Ψ on another backend (e.g. the GPU); `None` uses the f64 CPU reference.
    pub elastic: Option<Box<dyn ElasticTerms + Send>>,
}

/// What a step observer sees after each step ([`Simulation::set_observer`]): enough to
/// differentiate the step ([`crate::adjoint::Tape::observe`]).
pub struct ObservedStep<'a> {
    /// The step's number (1-based, [`Simulation::steps`] after it).
    pub number: usize,
    /// Time step, s.
    pub h: f64,
    /// The state the step started from.
    pub start: &'a State,
    /// The state it ended in.
    pub end: &'a State,
    /// The step's report (convergence, residual, substeps).
    pub report: &'a StepReport,
    /// IPC's contact stiffness κ the step's last solve ended with, J/m⁴ (0 without contact).
    pub kappa: f64,
    /// The friction that solve had lagged, with its energy at the start (J), if any.
    pub friction: Option<Arc<(FrictionSet, f64)>>,
}

/// A callback run after every step ([`Simulation::set_observer`]).
pub type StepObserver = Box<dyn FnMut(&ObservedStep<'_>)>;

/// A running simulation.
pub struct Simulation {
    /// The model (mesh, materials, pins, obstacles).
    pub model: Model,
    /// Current positions and velocities.
    pub state: State,
    /// Time step, s (a static solve's pseudo-time per load increment).
    pub h: f64,
    /// Steps completed (1-based numbering in messages: the next step is `steps + 1`).
    pub steps: usize,
    /// `Some(n)`: a static solve in `n` load increments — step k applies k/n of the loads, with
    /// no inertia ([`StepProblem::new_static`]); `None`: dynamics with the model's integrator.
    pub static_increments: Option<usize>,
    solver: Box<dyn StepSolver>,
    /// Runs the strict retries of `inversion = "forbid"` in place of `solver` when that has no
    /// strict filter of its own (the device JGS2/VBD: [`SimOptions::strict_solver`]).
    strict_solver: Option<Box<dyn StepSolver>>,
    /// Evaluates Ψ on another backend (e.g. the GPU); `None` uses the f64 CPU reference.
    elastic: Option<Box<dyn ElasticTerms + Send>>,
    /// Initial guesses that carry moving pins into the body ([`PinCarry`]).
    carry: PinCarry,
    /// Whether [`Self::carry`] is offered (default on; [`Self::set_pin_carry`]).
    pin_carry: bool,
    x_buf: Vec<f64>,
    /// Sees every step ([`Self::set_observer`]).
    observer: Option<StepObserver>,
    /// Finds objects passing through each other in a model without IPC contact between them
    /// (`None` with one object or with contact: [`CrossingWatch::new`]).
    crossings: Option<CrossingWatch>,
}

/// One solve of one (sub)step: where it ended and what the solver said.
struct Attempt {
    x: Vec<f64>,
    report: StepReport,
    check: StateCheck,
    /// The problem's κ and lagged friction after the solve.
    contact: (f64, Option<Arc<(FrictionSet, f64)>>),
}

impl Simulation {
    /// A simulation starting from `state`, with the defaults of [`SimOptions`].
    pub fn new(model: Model, state: State, h: f64, solver: Box<dyn StepSolver>) -> Result<Self> {
        Self::with_options(model, state, h, solver, SimOptions::default())
    }

    /// A simulation starting from `state` with `options`: a static solve, a strict solver, an
    /// elastic backend. These are fixed for the simulation's life.
    pub fn with_options(
        model: Model,
        mut state: State,
        h: f64,
        solver: Box<dyn StepSolver>,
        options: SimOptions,
    ) -> Result<Self> {
        if !(h.is_finite() && h > 0.0) {
            return Err(JelloError::Invalid(format!(
                "time step h must be > 0 s, got {h}"
            )));
        }
        if let Some(increments) = options.static_increments {
            if increments == 0 {
                return Err(JelloError::Invalid(
                    "a static solve needs at least one load increment".into(),
                ));
            }
            // No inertia: a static solve starts at rest, with no history.
            state.v.iter_mut().for_each(|v| *v = 0.0);
            state.history = None;
        }
        let crossings = CrossingWatch::new(&model)?;
        Ok(Simulation {
            model,
            state,
            h,
            steps: 0,
            static_increments: options.static_increments,
            solver,
            elastic: options.elastic,
            carry: PinCarry::new(),
            pin_carry: true,
            x_buf: Vec::new(),
            strict_solver: options.strict_solver,
            observer: None,
            crossings,
        })
    }

    /// Whether a step whose moving pins invert their neighbours at the default initial guess
    /// may start from the pins' carry instead ([`PinCarry`], default on): the step then starts
    /// from whichever of the guesses has the fewest elements inverted that were positive at
    /// xᵗ, then the lowest energy ([`StepProblem::offer_starts`]). Only such steps are
    /// affected: offered on every step with moving pins, the carry raised the fast twist's
    /// Newton iterations from 56 to 84 (the lower-energy start is not the one nearer the
    /// solution), so it is a repair, not a predictor.
    pub fn set_pin_carry(&mut self, enabled: bool) {
        self.pin_carry = enabled;
    }

    /// Drives pin `pin` (an index into [`Model::pins`]) from outside, e.g. a controller loop in
    /// Python: from the next step on, the pin holds its vertices at `targets` (m, one point per
    /// entry of [`crate::problem::Pin::vertices`], in that order) at the end of every step,
    /// until set again. The pin's script becomes [`Script::Fixed`] at `targets`, so the step
    /// problem moves the pinned vertices there exactly as it would follow a scripted target
    /// (the pins' carry included); a step split into substeps (`inversion = "forbid"`) or a
    /// static increment reaches the targets at its first substep. Setting the targets a fixed
    /// pin already has changes nothing.
    ///
    /// Errors (one line, nothing changed): no such pin, a count different from the pin's
    /// vertices, or a non-finite coordinate.
    pub fn set_pin_targets(&mut self, pin: usize, targets: &[[f64; 3]]) -> Result<()> {
        let count = self.model.pins.len();
        let Some(p) = self.model.pins.get_mut(pin) else {
            return Err(JelloError::Invalid(format!(
                "pin {pin} does not exist: the model has {count} pin(s) (0-based, in scene order)"
            )));
        };
        if targets.len() != p.vertices.len() {
            return Err(JelloError::Invalid(format!(
                "pin {pin} holds {} vertices, got {} target(s)",
                p.vertices.len(),
                targets.len()
            )));
        }
        if let Some(i) = targets
            .iter()
            .position(|t| t.iter().any(|c| !c.is_finite()))
        {
            return Err(JelloError::Invalid(format!(
                "pin {pin}: target {i} (vertex {}) is not finite: {:?}",
                p.vertices[i], targets[i]
            )));
        }
        p.start.clear();
        p.start.extend_from_slice(targets);
        p.script = Script::Fixed;
        Ok(())
    }

    /// Where pin `pin`'s vertices are held at time `t` (s): its script evaluated at `t`
    /// (m, one point per vertex, in [`crate::problem::Pin::vertices`] order); `None` when
    /// there is no such pin.
    pub fn pin_targets(&self, pin: usize, t: f64) -> Option<Vec<[f64; 3]>> {
        let p = self.model.pins.get(pin)?;
        Some(p.start.iter().map(|&p0| p.script.position(p0, t)).collect())
    }

    /// Runs `observer` after every step from now on (`None`: none), e.g. a recording adjoint
    /// tape ([`crate::adjoint::Tape::observe`]); it replaces the one set before.
    pub fn set_observer(&mut self, observer: Option<StepObserver>) {
        self.observer = observer;
    }

    /// Name of the backend evaluating Ψ.
    pub fn elastic_backend_name(&self) -> String {
        match &self.elastic {
            Some(e) => e.backend_name(),
            None => self.model.backend_name(),
        }
    }

    /// The solver's name.
    pub fn solver_name(&self) -> String {
        self.solver.name()
    }

    /// Advances one step of `h` (or one static load increment).
    ///
    /// The state is updated even when the solver did not converge (the report says so). After
    /// the solve the state is checked: inverted elements and obstacle penetrations are counted
    /// per body ([`StepReport::check`]); a step with either is never reported as converged
    /// (`converged` is the stop rule *and* a clean check), and [`StepReport::warnings`] names
    /// the counts. In a model with several objects and no IPC contact between them, pairs of
    /// objects whose surfaces cross for the first time are listed in
    /// [`StateCheck::crossings`] and named in a warning, once per pair
    /// ([`crate::contact::crossings`]); that does not make the step unconverged.
    ///
    /// Under [`InversionPolicy::Forbid`] a step that ends with an inverted element is not
    /// accepted as it is: it is solved again from the same start with the strict filter
    /// ([`StepProblem::strict_inversion`]: every iterate keeps every element positive), and if
    /// that does not converge, in [`FORBID_SUBSTEPS`] substeps (each strict); if none converges
    /// the strict full step's result (positive everywhere, not converged) is kept and
    /// [`StepReport::failure`] says why.
    ///
    /// When the pins' move inverts elements at the step's default initial guess (a fast pin
    /// script: the handle moves, its free neighbours stay), the step starts from the pins' carry
    /// instead ([`PinCarry`], [`Self::set_pin_carry`]): a start with inverted elements would
    /// have an infinite energy for materials with an inversion barrier, and the strict retry
    /// could not repair it.
    ///
    /// A non-finite energy, gradient or position is an error naming the step, the time and the
    /// cause as far as it is known ([`StepProblem::diagnose_non_finite`]); so is a scripted
    /// triangle-mesh obstacle whose jump to its position at the step's end would make it touch
    /// or cross a surface ([`StepProblem::obstacle_jump`]), before anything is solved.
    ///
    /// The new velocity is the integrator's, v = (x − x̂)/ĥ ([`StepScheme`]) whatever solved
    /// the step (substeps included), and a BDF2 run keeps the step's start as the next step's
    /// [`State::history`].
    ///
    /// `wall_ms` covers the whole step: set-up, the starting guess, every solve and the check.
    pub fn step(&mut self, trace: bool) -> Result<StepReport> {
        let start = Instant::now();
        let number = self.steps + 1;
        let state = self.state.clone();
        let mut attempt = self.solve(&state, self.h, false, trace, number)?;
        let mut extra_iterations = 0;
        let mut extra_work = StepWork::default();
        let mut failure = None;
        let mut substeps = 1;
        if self.model.inversion == InversionPolicy::Forbid && attempt.check.total_inverted() > 0 {
            let inverted = attempt.check.total_inverted();
            extra_iterations += attempt.report.iterations;
            extra_work.add(&attempt.report.work);
            let strict = self.solve(&state, self.h, true, trace, number)?;
            if strict.report.converged && strict.check.total_inverted() == 0 {
                attempt = strict;
            } else {
                let mut done = None;
                extra_iterations += strict.report.iterations;
                extra_work.add(&strict.report.work);
                for &k in &FORBID_SUBSTEPS {
                    match self.substeps(&state, k, trace, number)? {
                        Ok(a) => {
                            done = Some((a, k));
                            break;
                        }
                        Err(iterations) => extra_iterations += iterations,
                    }
                }
                match done {
                    Some((a, k)) => {
                        attempt = a;
                        substeps = k;
                    }
                    None => {
                        let kept = if strict.check.total_inverted() == 0 {
                            "kept the strict solve's state (every J > 0, not converged)"
                        } else {
                            "this solver cannot keep elements positive; kept its state"
                        };
                        failure = Some(format!(
                            "the step ended with {inverted} inverted element(s); solved again \
                             keeping every element positive it did not converge ({} iterations \
                             at h = {} s, residual {:.2e}), nor in {:?} substeps; {kept}",
                            strict.report.iterations,
                            self.h,
                            strict.report.residual,
                            FORBID_SUBSTEPS
                        ));
                        if strict.check.total_inverted() <= attempt.check.total_inverted() {
                            attempt = strict;
                        }
                    }
                }
            }
        }
        let Attempt {
            x,
            mut report,
            mut check,
            contact,
        } = attempt;
        if let Some(watch) = self.crossings.as_mut() {
            check.crossings = watch.check(&x)?;
        }
        report.iterations += extra_iterations;
        report.work.add(&extra_work);
        report.substeps = substeps;
        report.stop_rule_met = report.converged;
        report.converged = report.converged && check.is_clean() && failure.is_none();
        report.warnings = self.warnings(number, &check, &failure);
        report.check = check;
        report.failure = failure;
        // Commit.
        self.x_buf = x;
        if self.static_increments.is_some() {
            self.state.v.iter_mut().for_each(|v| *v = 0.0);
            self.state.history = None;
        } else {
            StepScheme::new(&self.model, &state, self.h)
                .velocity_into(&self.x_buf, &mut self.state.v);
            self.state.history = self.model.integrator.keeps_history().then(|| History {
                x: state.x.clone(),
                v: state.v.clone(),
            });
        }
        std::mem::swap(&mut self.state.x, &mut self.x_buf);
        self.state.t = state.t + self.h;
        self.steps = number;
        report.wall_ms = start.elapsed().as_secs_f64() * 1e3;
        if let Some(observe) = self.observer.as_mut() {
            observe(&ObservedStep {
                number,
                h: self.h,
                start: &state,
                end: &self.state,
                report: &report,
                kappa: contact.0,
                friction: contact.1,
            });
        }
        Ok(report)
    }

    /// `k` strict substeps of h/k from `state`: `Ok` when every one converged with every element
    /// positive (its report aggregates the substeps), else `Err(iterations spent)`.
    fn substeps(
        &mut self,
        state: &State,
        k: usize,
        trace: bool,
        number: usize,
    ) -> Result<std::result::Result<Attempt, usize>> {
        let sub_h = self.h / k as f64;
        // Substeps are implicit Euler: BDF2's history is one full step back, not one substep
        // (the step's velocity is still BDF2's, from the substeps' end: see `step`).
        let mut cur = State {
            history: None,
            ..state.clone()
        };
        let mut total: Option<Attempt> = None;
        let mut iterations = 0;
        for _ in 0..k {
            let a = self.solve(&cur, sub_h, true, trace, number)?;
            iterations += a.report.iterations;
            if !(a.report.converged && a.check.total_inverted() == 0) {
                return Ok(Err(iterations));
            }
            let v =
                a.x.iter()
                    .zip(&cur.x)
                    .map(|(x1, x0)| (x1 - x0) / sub_h)
                    .collect();
            cur = State::new(a.x.clone(), v, cur.t + sub_h);
            total = Some(match total {
                None => a,
                Some(mut t) => {
                    t.report.iterations += a.report.iterations;
                    let mut work = a.report.work.clone();
                    work.add(&t.report.work);
                    t.report.work = work;
                    t.report.energy_change += a.report.energy_change;
                    t.report.residual = a.report.residual;
                    t.report.energy = a.report.energy;
                    t.report.timings.add(&a.report.timings);
                    if let (Some(tr), Some(more)) = (t.report.trace.as_mut(), a.report.trace) {
                        tr.extend(more);
                    }
                    t.x = a.x;
                    t.check = a.check;
                    t
                }
            });
        }
        Ok(total.ok_or(iterations))
    }

    /// One solve from `state` with step `h` (strict: every iterate keeps elements positive).
    fn solve(
        &mut self,
        state: &State,
        h: f64,
        strict: bool,
        trace: bool,
        number: usize,
    ) -> Result<Attempt> {
        let t0 = Instant::now();
        let mut problem = match self.static_increments {
            Some(n) => {
                // The load fraction of the increment that ends at t + h (h is the increment's
                // pseudo-time; substeps split it).
                let fraction = (((state.t + h) / self.h) / n as f64).min(1.0);
                StepProblem::new_static(&self.model, state, h, fraction)
            }
            None => StepProblem::new(&self.model, state, h),
        };
        problem.strict_inversion = strict;
        if self.pin_carry && problem.pins_move() && problem.start_inversions() > 0 {
            let candidates = self.carry.candidates(&self.model, &problem)?;
            problem.offer_starts(candidates);
        }
        let elastic: &dyn ElasticTerms = match &self.elastic {
            Some(e) => e.as_ref(),
            None => &self.model,
        };
        let fail = |why: String| {
            JelloError::Solver(format!(
                "step {number} (t = {:.6} s → {:.6} s): {why}",
                state.t,
                state.t + h
            ))
        };
        if let Some(why) = &problem.obstacle_jump {
            return Err(fail(why.clone()));
        }
        if !problem.start_is_finite(elastic) {
            return Err(fail(problem.diagnose_non_finite(elastic, &problem.x_start)));
        }
        let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut x = Vec::new();
        let solver = match (&mut self.strict_solver, strict) {
            (Some(s), true) => s,
            _ => &mut self.solver,
        };
        let mut report = solver
            .step(&problem, elastic, &mut x, trace)
            .map_err(|e| match e {
                JelloError::Solver(m) => fail(m),
                other => other,
            })?;
        report.timings.setup_ms += setup_ms;
        if x.iter().any(|v| !v.is_finite()) || !report.energy.is_finite() {
            return Err(fail(format!(
                "the solver returned a non-finite state: {}",
                problem.diagnose_non_finite(elastic, &x)
            )));
        }
        let check = self.model.check_state(&x);
        let contact = (problem.kappa(), problem.lagged_friction());
        Ok(Attempt {
            x,
            report,
            check,
            contact,
        })
    }

    /// One line per violated invariant of step `number`.
    fn warnings(&self, number: usize, check: &StateCheck, failure: &Option<String>) -> Vec<String> {
        let t = self.state.t + self.h;
        let mut out = Vec::new();
        let per_body = |counts: &[usize]| {
            counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(b, c)| {
                    let name = self.model.bodies.get(b).map(|b| b.name.as_str());
                    format!("{c} in `{}`", name.unwrap_or("body"))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        if check.total_inverted() > 0 {
            out.push(format!(
                "step {number} (t = {t:.6} s): {} inverted element(s) (J ≤ 0; {}), smallest J \
                 {:.3e}{}",
                check.total_inverted(),
                per_body(&check.inverted),
                check.min_j,
                if self.model.inversion == InversionPolicy::Allow {
                    "; the scene allows inversion"
                } else {
                    ""
                }
            ));
        }
        if check.total_penetrations() > 0 {
            out.push(format!(
                "step {number} (t = {t:.6} s): {} surface triangle(s) inside an obstacle ({})",
                check.total_penetrations(),
                per_body(&check.penetrations)
            ));
        }
        for c in &check.crossings {
            out.push(format!(
                "step {number} (t = {t:.6} s): objects `{}` ({}) and `{}` ({}) pass through each \
                 other ({} surface triangle pair(s) cross): the scene has no contact between \
                 objects; set `ipc = true` under [contact] (solvers newton, multilevel) to make \
                 them collide",
                c.names[0], c.objects[0], c.names[1], c.objects[1], c.triangle_pairs
            ));
        }
        if let Some(f) = failure {
            out.push(format!("step {number} (t = {t:.6} s) failed: {f}"));
        }
        out
    }
}
