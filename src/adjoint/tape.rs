//! A recorded run: the model, the kept states, each step's convergence and its extra forces.

use super::contact::StepContact;
use super::options::{Checkpointing, RecordOptions};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::problem::{History, Model, Script, State, StepProblem, StepScheme};
use crate::solver::{NewtonParams, NewtonSolver, StepSolver, StopRule};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How one recorded step ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRecord {
    /// Whether Newton met the characteristic-norm tolerance.
    pub converged: bool,
    /// The final characteristic-norm residual (dimensionless).
    pub residual: f64,
    /// Newton iterations.
    pub iterations: usize,
}

/// A run recorded for differentiation ([`Self::backward`](super::Tape::backward)): implicit
/// Euler or BDF2 steps of a fixed model solved by the f64 Newton reference to
/// [`RecordOptions::tolerance`], with the states kept as [`RecordOptions::checkpointing`] says.
pub struct Tape {
    pub(super) model: Model,
    pub(super) h: f64,
    pub(super) options: RecordOptions,
    /// The tape's own solver: it solves the steps of a tape that records them, and re-solves
    /// the states not kept; `None` for a tape that observes a simulation and keeps every state.
    solver: Option<NewtonSolver>,
    /// Whether the steps are a simulation's, observed ([`Self::observing`]), rather than solved
    /// here.
    observes: bool,
    /// Per observed step s, where the pins held their vertices at its end (m, 3 per pinned
    /// vertex in pin order): what re-solving it needs, as the targets may have been set from
    /// outside between steps. Empty unless an observing tape drops states.
    pin_targets: Vec<Vec<f64>>,
    /// Why an observed run cannot be differentiated (a state set between steps, a substepped
    /// step), if it cannot.
    pub(super) broken: Option<String>,
    /// Kept states by step number (0 = the initial state).
    pub(super) kept: BTreeMap<usize, State>,
    /// The latest state.
    current: State,
    /// Per step s (from state s to s + 1).
    pub(super) records: Vec<StepRecord>,
    /// Per step s, the extra per-vertex external forces (N, 3n) acting during it, if any.
    pub(super) forces: Vec<Option<Arc<Vec<f64>>>>,
    /// Per step s, the contact terms it was solved with (κ, lagged friction), held fixed by
    /// the backward pass.
    pub(super) contact: Vec<StepContact>,
    /// Wall time of the recorded steps, ms.
    pub(super) forward_ms: f64,
}

impl Tape {
    /// Starts a recording at `state` with time step `h` (s). Refuses, in one line, what the
    /// adjoint does not differentiate (strain limits) and a non-positive h or tolerance, a
    /// state of the wrong size, `Every(0)`.
    pub fn new(model: Model, state: State, h: f64, options: RecordOptions) -> Result<Self> {
        let mut tape = Self::unsolved(model, state, h, options)?;
        let params = NewtonParams {
            stop: StopRule::Cn {
                eps: options.tolerance,
            },
            max_iterations: options.max_iterations,
            ..NewtonParams::default()
        };
        tape.solver = Some(NewtonSolver::new(&tape.model, params)?);
        Ok(tape)
    }

    /// A tape that records the steps a [`crate::sim::Simulation`] takes from `state` with time
    /// step `h` (s), as its observer sees them ([`Self::observe`]; Python's `sim.record()`):
    /// every state is kept, and the gradient is that of the states the simulation's own solver
    /// computed — exact to the order of its tolerance (f64 Newton with `stop = "cn"` and a
    /// tight tolerance makes it exact; a step whose report is not converged is refused or
    /// flagged as [`super::Unconverged`] says). Refuses what [`Self::new`] refuses.
    pub fn observing(model: Model, state: State, h: f64) -> Result<Self> {
        Self::observing_with(model, state, h, RecordOptions::default())
    }

    /// [`Self::observing`] keeping the states `options.checkpointing` says: the others are
    /// re-solved in the backward pass by the tape's own f64 Newton (to `options.tolerance`,
    /// at most `options.max_iterations` iterations) from the nearest kept state, with each
    /// step's pins where the simulation held them. A re-solved state is Newton's, not the
    /// simulation's: the two agree to the solvers' tolerances (bit for bit when the
    /// simulation's solver is the same Newton with the same stop rule), and the gradient is
    /// exact to that order.
    pub fn observing_with(
        model: Model,
        state: State,
        h: f64,
        options: RecordOptions,
    ) -> Result<Self> {
        let mut tape = if options.checkpointing == Checkpointing::All {
            Self::unsolved(model, state, h, options)?
        } else {
            Self::new(model, state, h, options)?
        };
        tape.observes = true;
        Ok(tape)
    }

    /// Whether state `s` (≥ 1) is kept under the tape's checkpointing.
    fn keeps(&self, s: usize) -> bool {
        match self.options.checkpointing {
            Checkpointing::All => true,
            Checkpointing::Every(k) => s.is_multiple_of(k),
            Checkpointing::Binomial(_) => false,
        }
    }

    /// Records one step a simulation took ([`crate::sim::Simulation::set_observer`]). A step
    /// that does not start where the tape's last one ended (positions or velocities set
    /// between steps), or that was solved in substeps (`inversion = "forbid"`), or with
    /// another time step, breaks the record: a later backward pass refuses, naming it.
    pub fn observe(&mut self, step: &crate::sim::ObservedStep<'_>) {
        if self.broken.is_some() {
            return;
        }
        let s = self.records.len();
        let why = if step.start.x != self.current.x || step.start.v != self.current.v {
            Some(format!(
                "the state was set between steps {s} and {} (positions or velocities assigned): \
                 the recorded steps no longer chain",
                s + 1
            ))
        } else if step.report.substeps > 1 {
            Some(format!(
                "step {} was solved in {} substeps (inversion = \"forbid\"): a substepped step \
                 is not differentiated",
                s + 1,
                step.report.substeps
            ))
        } else if step.h != self.h {
            Some(format!("step {} changed the time step", s + 1))
        } else {
            None
        };
        if let Some(why) = why {
            self.broken = Some(why);
            return;
        }
        self.records.push(StepRecord {
            converged: step.report.converged,
            residual: step.report.residual,
            iterations: step.report.iterations,
        });
        self.forces.push(None);
        self.contact.push(StepContact {
            kappa: step.kappa,
            friction: step.friction.clone(),
        });
        if self.keeps(s + 1) {
            self.kept.insert(s + 1, step.end.clone());
        }
        if self.solver.is_some() {
            let x = &step.end.x;
            let targets = self.model.pins.iter().flat_map(|p| &p.vertices);
            let targets = targets.flat_map(|&v| x[3 * v as usize..3 * v as usize + 3].to_vec());
            self.pin_targets.push(targets.collect());
        }
        self.current = step.end.clone();
    }

    /// [`Self::new`] without a solver.
    fn unsolved(model: Model, state: State, h: f64, options: RecordOptions) -> Result<Self> {
        let bad = |m: String| Err(JelloError::Invalid(format!("adjoint: {m}")));
        if !(h.is_finite() && h > 0.0) {
            return bad(format!("time step h must be > 0 s, got {h}"));
        }
        if !(options.tolerance.is_finite() && options.tolerance > 0.0) {
            return bad(format!("tolerance must be > 0, got {}", options.tolerance));
        }
        if options.checkpointing == Checkpointing::Every(0) {
            return bad("checkpointing Every(k) needs k ≥ 1".into());
        }
        let n = 3 * model.num_vertices();
        if state.x.len() != n || state.v.len() != n {
            return bad(format!(
                "the state holds {} positions and {} velocities, the model {n} DOFs",
                state.x.len(),
                state.v.len()
            ));
        }
        if !model.strain_limits.is_empty() {
            return bad("strain limits are not differentiated".into());
        }
        let mut kept = BTreeMap::new();
        kept.insert(0, state.clone());
        Ok(Tape {
            model,
            h,
            options,
            solver: None,
            observes: false,
            pin_targets: Vec::new(),
            broken: None,
            kept,
            current: state,
            records: Vec::new(),
            forces: Vec::new(),
            contact: Vec::new(),
            forward_ms: 0.0,
        })
    }

    /// Records `steps` steps from `state` ([`Self::new`], then [`Self::step`] with no extra
    /// forces).
    pub fn record(
        model: Model,
        state: State,
        h: f64,
        steps: usize,
        options: RecordOptions,
    ) -> Result<Self> {
        let mut tape = Tape::new(model, state, h, options)?;
        for _ in 0..steps {
            tape.step(None)?;
        }
        Ok(tape)
    }

    /// Solves and records one step, with `forces` (N, one per DOF, 3n) added to the model's
    /// own during it. A step that does not converge is recorded (the backward pass refuses or
    /// flags it, [`super::Unconverged`]); a non-finite state or bad force array is an error.
    pub fn step(&mut self, forces: Option<&[f64]>) -> Result<StepRecord> {
        let n = self.current.x.len();
        let Some(solver) = self.solver.as_mut().filter(|_| !self.observes) else {
            return Err(JelloError::Invalid(
                "adjoint: this tape observes a simulation; step the simulation instead".into(),
            ));
        };
        let forces = match forces {
            Some(f) if f.len() != n => {
                return Err(JelloError::Invalid(format!(
                    "adjoint: {} force entries for {n} DOFs",
                    f.len()
                )))
            }
            Some(f) if f.iter().any(|v| !v.is_finite()) => {
                return Err(JelloError::Invalid(
                    "adjoint: the step's forces must be finite".into(),
                ))
            }
            Some(f) => Some(Arc::new(f.to_vec())),
            None => None,
        };
        let t0 = Instant::now();
        let number = self.records.len();
        let (next, record, contact) = advance(
            solver,
            &self.model,
            &self.current,
            self.h,
            forces.as_deref().map(|f| f.as_slice()),
            number + 1,
        )?;
        self.forward_ms += t0.elapsed().as_secs_f64() * 1e3;
        self.records.push(record);
        self.forces.push(forces);
        self.contact.push(contact);
        let s = number + 1;
        if self.keeps(s) {
            self.kept.insert(s, next.clone());
        }
        self.current = next;
        Ok(record)
    }

    /// Steps recorded.
    pub fn steps(&self) -> usize {
        self.records.len()
    }

    /// How each recorded step ended.
    pub fn records(&self) -> &[StepRecord] {
        &self.records
    }

    /// The latest state.
    pub fn state(&self) -> &State {
        &self.current
    }

    /// The model the run was recorded with.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Wall time of the recorded steps, ms.
    pub fn forward_ms(&self) -> f64 {
        self.forward_ms
    }

    /// Recomputes the state after step `s` from `start` (state s), as the forward pass did.
    pub(super) fn recompute(&mut self, start: &State, s: usize) -> Result<State> {
        let forces = self.forces[s].clone();
        if let Some(targets) = self.pin_targets.get(s) {
            // The pins where the simulation held them at the step's end (scripted, or set
            // between steps).
            let mut at = targets.chunks_exact(3);
            for pin in &mut self.model.pins {
                pin.start = (&mut at)
                    .take(pin.vertices.len())
                    .map(|c| [c[0], c[1], c[2]])
                    .collect();
                pin.script = Script::Fixed;
            }
        }
        let solver = self.solver.as_mut().ok_or_else(|| {
            JelloError::Invalid(format!(
                "adjoint: state {s} was not kept and an observing tape cannot re-solve it"
            ))
        })?;
        let (next, _, _) = advance(
            solver,
            &self.model,
            start,
            self.h,
            forces.as_deref().map(|f| f.as_slice()),
            s + 1,
        )?;
        Ok(next)
    }
}

/// One step from `state`: the model's step problem (plus `forces`: x̃_v += ĥ² f_v/m_v on free
/// vertices) solved by `solver`; the new state carries the integrator's velocity and history,
/// and the contact terms the solve ended with come back too.
fn advance(
    solver: &mut NewtonSolver,
    model: &Model,
    state: &State,
    h: f64,
    forces: Option<&[f64]>,
    number: usize,
) -> Result<(State, StepRecord, StepContact)> {
    let mut problem = StepProblem::new(model, state, h);
    let fail = |why: String| {
        JelloError::Solver(format!(
            "adjoint: step {number} (t = {:.6} s): {why}",
            state.t
        ))
    };
    if let Some(f) = forces {
        let hh = problem.h_hat;
        for (k, fk) in f.iter().enumerate() {
            if !problem.fixed[k] {
                problem.x_tilde[k] += hh * hh * fk / model.mass[k / 3];
            }
        }
    }
    if !problem.start_is_finite(model) {
        return Err(fail(problem.diagnose_non_finite(model, &problem.x_start)));
    }
    let mut x = Vec::new();
    let report = solver.step(&problem, model, &mut x, false)?;
    if x.iter().any(|v| !v.is_finite()) {
        return Err(fail("the solver returned a non-finite state".into()));
    }
    let mut v = vec![0.0; x.len()];
    StepScheme::new(model, state, h).velocity_into(&x, &mut v);
    let next = State {
        x,
        v,
        t: state.t + h,
        history: model.integrator.keeps_history().then(|| History {
            x: state.x.clone(),
            v: state.v.clone(),
        }),
    };
    Ok((
        next,
        StepRecord {
            converged: report.converged,
            residual: report.residual,
            iterations: report.iterations,
        },
        StepContact::of(&problem),
    ))
}
