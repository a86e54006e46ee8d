//! `stats.json`: what a run did, step by step.

use super::manifest::RunStatus;
use crate::error::{JelloError, Result};
use crate::solver::{IterationRecord, StepReport, StepTimings, StepWork};
use serde::Serialize;

/// One step's entry in `stats.json`.
#[derive(Clone, Debug, Serialize)]
pub struct StepStats {
    /// Step index (1-based: step 1 ends at t = h).
    pub step: usize,
    /// Time at the end of the step, s.
    pub time: f64,
    /// Solver iterations.
    pub iterations: usize,
    /// Whether the step is good: the stop rule met and no invariant violated.
    pub converged: bool,
    /// Whether the stop rule alone was met.
    pub stop_rule_met: bool,
    /// Substeps the step took (1 unless a forbidden inversion made it retry).
    pub substeps: usize,
    /// Inverted elements (J ≤ 0) per object at the step's end.
    pub inverted: Vec<usize>,
    /// Surface triangles inside an obstacle, per object, at the step's end.
    pub penetrations: Vec<usize>,
    /// Pairs of objects whose surfaces first cross at this step, in a scene without IPC contact
    /// between objects (each pair listed once per run; see [`crate::contact::crossings`]).
    pub crossings: Vec<crate::contact::Crossing>,
    /// Why the step failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Final characteristic-norm residual (converged when < ε under `--stop cn`).
    pub residual: f64,
    /// Final incremental potential, J (carries the inertia term's constant).
    pub energy: f64,
    /// E(end) − E(initial guess) of the step, J, summed per element and per vertex.
    pub energy_change: f64,
    /// Wall time of the whole step, ms: set-up, every solve (retries and substeps included) and
    /// the invariant check; outputs are in `output_ms`.
    pub wall_ms: f64,
    /// Wall time spent after this step writing outputs, ms: the frame (`.vtu`, `.pvd`, `.obj`,
    /// `.png`), `stats.json`, the checkpoint and the manifest; 0 for steps without a frame.
    /// The copy of `stats.json` written at a frame shows that frame's files only (it cannot
    /// time its own write); later copies show the whole.
    pub output_ms: f64,
    /// Time split, ms.
    pub timings: StepTimings,
    /// Inner-solver work: CG iterations per level, line-search trials, refactorisations, and
    /// ADMM's primal/dual residuals at the step's last iteration (the last `--trace` record's).
    pub work: StepWork,
    /// Per-iteration residual and energy (with `--trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<Vec<IterationRecord>>,
}

impl StepStats {
    /// From a solver report.
    pub fn new(step: usize, time: f64, r: StepReport) -> Self {
        StepStats {
            step,
            time,
            iterations: r.iterations,
            converged: r.converged,
            stop_rule_met: r.stop_rule_met,
            substeps: r.substeps,
            inverted: r.check.inverted,
            penetrations: r.check.penetrations,
            crossings: r.check.crossings,
            failure: r.failure,
            residual: r.residual,
            energy: r.energy,
            energy_change: r.energy_change,
            wall_ms: r.wall_ms,
            output_ms: 0.0,
            timings: r.timings,
            work: r.work,
            trace: r.trace,
        }
    }
}

/// The whole `stats.json`. Totals cover every step the file lists, including those of the run a
/// `--resume` continued; [`RunStats::steps`] holds the steps of this call only (the earlier
/// ones are carried as read).
#[derive(Clone, Debug, Serialize)]
pub struct RunStats {
    /// Scene file.
    pub scene: String,
    /// Solver name.
    pub solver: String,
    /// With `--solver auto` (`[solver] name = "auto"`): why the rule picked `solver`
    /// (`jello::runner::auto`); absent when the solver was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solver_auto_reason: Option<String>,
    /// Stop rule (`cn` or `dx`) and its tolerance.
    pub stop: String,
    /// Tolerance of the stop rule.
    pub tolerance: f64,
    /// `cpu` or `gpu`.
    pub backend: String,
    /// Adapter that ran the kernels (null on the CPU backend).
    pub adapter: Option<String>,
    /// Why this backend was chosen (e.g. "hardware adapter found", "requested").
    pub backend_reason: String,
    /// Vertex count.
    pub vertices: usize,
    /// Tet count.
    pub tets: usize,
    /// Time step, s.
    pub h: f64,
    /// `running` (written at a frame), `complete`, `failed` or `interrupted`.
    pub status: RunStatus,
    /// The error that stopped a failed run (one line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Steps asked for.
    pub requested_steps: usize,
    /// Steps done (the last listed step).
    pub completed_steps: usize,
    /// Steps at which the run was resumed (`--resume`), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resumed_at: Vec<usize>,
    /// Steps that met the stop rule.
    pub converged_steps: usize,
    /// The first step that did not meet the stop rule, if any.
    pub first_unconverged_step: Option<usize>,
    /// Total iterations over all steps.
    pub total_iterations: usize,
    /// Total wall time of the steps, ms (outputs excluded).
    pub total_wall_ms: f64,
    /// Total wall time writing outputs, ms: every step's `output_ms` plus frame 0.
    pub total_output_ms: f64,
    /// Wall time of this call's set-up (device, solver, JGS2 subspace load or build), ms.
    pub setup_ms: f64,
    /// Per step.
    pub steps: Vec<StepStats>,
    /// Steps of the run a resume continued, as read from its `stats.json`; written before
    /// `steps`.
    #[serde(skip)]
    pub earlier_steps: Vec<serde_json::Value>,
}

impl RunStats {
    /// Adds a step of this call to the list and the totals.
    pub fn push(&mut self, s: StepStats) {
        self.total_iterations += s.iterations;
        self.total_wall_ms += s.wall_ms;
        if s.converged {
            self.converged_steps += 1;
        } else if self.first_unconverged_step.is_none() {
            self.first_unconverged_step = Some(s.step);
        }
        self.completed_steps = s.step;
        self.steps.push(s);
    }

    /// Adds output time to the latest step (or, before any step, to frame 0's share).
    pub fn add_output_ms(&mut self, ms: f64) {
        self.total_output_ms += ms;
        if let Some(s) = self.steps.last_mut() {
            s.output_ms += ms;
        }
    }

    /// Takes over the steps `earlier` (a `stats.json` `steps` array) up to `last_step`, and
    /// their totals. Entries without the fields this build writes count as zero.
    pub fn carry_earlier(&mut self, earlier: Vec<serde_json::Value>, last_step: usize) {
        for s in earlier {
            let Some(step) = s["step"].as_u64().map(|v| v as usize) else {
                continue;
            };
            if step > last_step {
                continue;
            }
            self.total_iterations += s["iterations"].as_u64().unwrap_or(0) as usize;
            self.total_wall_ms += s["wall_ms"].as_f64().unwrap_or(0.0);
            self.total_output_ms += s["output_ms"].as_f64().unwrap_or(0.0);
            if s["converged"].as_bool() == Some(true) {
                self.converged_steps += 1;
            } else if self.first_unconverged_step.is_none() {
                self.first_unconverged_step = Some(step);
            }
            self.completed_steps = step;
            self.earlier_steps.push(s);
        }
    }

    /// Steps listed in total (earlier and this call's).
    pub fn listed_steps(&self) -> usize {
        self.earlier_steps.len() + self.steps.len()
    }

    /// The `stats.json` bytes.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let err = |e: serde_json::Error| JelloError::Invalid(format!("stats.json: {e}"));
        if self.earlier_steps.is_empty() {
            return serde_json::to_vec_pretty(self).map_err(err);
        }
        let mut v = serde_json::to_value(self).map_err(err)?;
        if let Some(steps) = v.get_mut("steps").and_then(|s| s.as_array_mut()) {
            let mut all = self.earlier_steps.clone();
            all.append(steps);
            *steps = all;
        }
        serde_json::to_vec_pretty(&v).map_err(err)
    }
}
