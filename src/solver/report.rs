//! What a solver reports for one step.

use serde::Serialize;
use std::time::Instant;

/// One iteration of a trace.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct IterationRecord {
    /// Characteristic-norm residual after the iteration.
    pub residual: f64,
    /// Incremental potential E, J.
    pub energy: f64,
    /// Line-search step length (1 when no line search).
    pub alpha: f64,
}

/// Time split of a step, ms.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct StepTimings {
    /// Energy/gradient/Hessian evaluation and assembly, ms.
    pub assembly_ms: f64,
    /// Numeric factorisation, ms.
    pub factor_ms: f64,
    /// Triangular solves (or local solves), ms.
    pub solve_ms: f64,
    /// Line search, ms.
    pub line_search_ms: f64,
}

/// The outcome of one time step.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// Iterations taken.
    pub iterations: usize,
    /// Whether the stop rule was met (a step that hit the iteration cap is reported as such).
    pub converged: bool,
    /// Final characteristic-norm residual (converged under `--stop cn` when < ε).
    pub residual: f64,
    /// Final incremental potential E, J.
    pub energy: f64,
    /// Wall time of the step, ms.
    pub wall_ms: f64,
    /// Time split.
    pub timings: StepTimings,
    /// Per-iteration records (with `--trace`); entry 0 is the initial guess.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<Vec<IterationRecord>>,
}

/// Milliseconds since `t`.
pub(crate) fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Largest per-vertex Euclidean norm of a flattened 3-vector field.
pub(crate) fn max_vertex_norm(v: &[f64]) -> f64 {
    v.chunks_exact(3)
        .map(|c| (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt())
        .fold(0.0, f64::max)
}
