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
    /// Whether the stop rule was met.
    pub converged: bool,
    /// Final characteristic-norm residual (converged when < ε under `--stop cn`).
    pub residual: f64,
    /// Final incremental potential, J.
    pub energy: f64,
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
            residual: r.residual,
            energy: r.energy,
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
