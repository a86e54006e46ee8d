//! `stats.json`: what a run did, step by step.

use crate::solver::{IterationRecord, StepReport, StepTimings};
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
    /// Why the step failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Final characteristic-norm residual (converged when < ε under `--stop cn`).
    pub residual: f64,
    /// Final incremental potential, J (carries the inertia term's constant).
    pub energy: f64,
    /// E(end) − E(initial guess) of the step, J, summed per element and per vertex.
    pub energy_change: f64,
    /// Wall time of the step, ms.
    pub wall_ms: f64,
    /// Time split, ms.
    pub timings: StepTimings,
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
            failure: r.failure,
            residual: r.residual,
            energy: r.energy,
            energy_change: r.energy_change,
            wall_ms: r.wall_ms,
            timings: r.timings,
            trace: r.trace,
        }
    }
}

/// The whole `stats.json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunStats {
    /// Scene file.
    pub scene: String,
    /// Solver name.
    pub solver: String,
    /// Stop rule (`cn` or `dx`) and its tolerance.
    pub stop: String,
    /// Tolerance of the stop rule.
    pub tolerance: f64,
    /// `cpu` or `gpu`.
    pub backend: String,
    /// Adapter that ran the kernels (null on the CPU backend).
    pub adapter: Option<String>,
    /// Vertex count.
    pub vertices: usize,
    /// Tet count.
    pub tets: usize,
    /// Time step, s.
    pub h: f64,
    /// Steps that met the stop rule / all steps.
    pub converged_steps: usize,
    /// Total iterations over all steps.
    pub total_iterations: usize,
    /// Total wall time of the steps, ms.
    pub total_wall_ms: f64,
    /// Per step.
    pub steps: Vec<StepStats>,
}
