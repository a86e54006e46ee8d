//! What a solver reports for one step.

use crate::clock::Instant;
use serde::Serialize;

/// One iteration of a trace.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct IterationRecord {
    /// Characteristic-norm residual after the iteration.
    pub residual: f64,
    /// Incremental potential relative to the step's initial guess, E(x_k) − E(x_start), J
    /// ([`crate::problem::StepProblem::energy_change`]; ≤ 0 for a descent method).
    pub energy: f64,
    /// Line-search step length (1 when no line search).
    pub alpha: f64,
    /// JGS2 / VBD under a safeguard ([`crate::solver::jgs2::Safeguard`]): whether the
    /// iteration took the quadratic model's step (`true`) or kept the plain step (`false`);
    /// `None` without a safeguard and for other solvers.
    pub model_step: Option<bool>,
    /// ADMM: primal residual ‖r‖ = ‖W(Dx − z)‖ after the iteration, √J (`None` for other
    /// solvers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primal: Option<f64>,
    /// ADMM: dual residual ‖s‖ = ‖DᵀW²(zⁿ⁺¹ − zⁿ)‖ over the free vertices, N (`None` for other
    /// solvers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dual: Option<f64>,
    /// ADMM: combined residual ‖G(q) − q‖_W of the iteration's state (the Anderson
    /// safeguard's measure), √J; `None` where not evaluated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub combined: Option<f64>,
    /// ADMM with Anderson acceleration: `Some(true)` when the iteration's state was a mix the
    /// safeguard kept, `Some(false)` when it rejected it (the next iteration restarts from the
    /// plain step); `None` for a plain step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accelerated: Option<bool>,
}

/// Time split of a step, ms.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct StepTimings {
    /// Step set-up: inertial target, pins, the starting guess and its energies, ms.
    pub setup_ms: f64,
    /// Energy/gradient/Hessian evaluation and assembly, ms.
    pub assembly_ms: f64,
    /// Of `assembly_ms`, the Hessian's part where a solver times it apart (Newton's direct
    /// solve: element Hessians, their filter and the sparse matrix), ms; 0 otherwise.
    pub hessian_ms: f64,
    /// Numeric factorisation, ms.
    pub factor_ms: f64,
    /// Triangular solves (or local solves), ms.
    pub solve_ms: f64,
    /// Line search, ms.
    pub line_search_ms: f64,
}

impl StepTimings {
    /// Adds `other`'s times field by field (steps or solves summed).
    pub fn add(&mut self, other: &StepTimings) {
        self.setup_ms += other.setup_ms;
        self.assembly_ms += other.assembly_ms;
        self.hessian_ms += other.hessian_ms;
        self.factor_ms += other.factor_ms;
        self.solve_ms += other.solve_ms;
        self.line_search_ms += other.line_search_ms;
    }
}

/// Work a step's inner solvers did, summed over the step's iterations (retries and substeps
/// included): what a user reads to see where a solver spends its time beyond the outer iteration
/// count. Each solver fills the fields that apply to it and leaves the others at their defaults.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepWork {
    /// Conjugate-gradient iterations per level, finest first: one entry for Newton-PCG, one per
    /// level for the multilevel solver; empty when no CG ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cg_iterations: Vec<usize>,
    /// Line-search trials (energy evaluations at a trial point) over the step; 0 when the solver
    /// has no line search.
    pub line_search_trials: usize,
    /// Numeric refactorisations of a global matrix over the step (ADMM's penalty updates,
    /// Newton's factorisations); 0 when none.
    pub refactorisations: usize,
    /// ADMM: primal residual ‖W(Dx − z)‖ at the step's last iteration, √J.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primal: Option<f64>,
    /// ADMM: dual residual ‖DᵀW²(zⁿ⁺¹ − zⁿ)‖ at the step's last iteration, N.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dual: Option<f64>,
}

impl StepWork {
    /// Adds the counts of `other` (a retry or an earlier substep of the same step) to these;
    /// the residuals stay this solve's (the step's last).
    pub fn add(&mut self, other: &StepWork) {
        if self.cg_iterations.len() < other.cg_iterations.len() {
            self.cg_iterations.resize(other.cg_iterations.len(), 0);
        }
        for (a, b) in self.cg_iterations.iter_mut().zip(&other.cg_iterations) {
            *a += b;
        }
        self.line_search_trials += other.line_search_trials;
        self.refactorisations += other.refactorisations;
    }
}

/// The outcome of one time step.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepReport {
    /// Iterations taken (over every solve of the step: retries and substeps included).
    pub iterations: usize,
    /// Whether the step is good: the stop rule was met and the state check is clean (no
    /// inverted element, no obstacle penetration) — see [`crate::sim::Simulation::step`].
    pub converged: bool,
    /// Whether the stop rule alone was met (by the solve that was kept).
    pub stop_rule_met: bool,
    /// Substeps the step was solved in (1, or more after a failed strict retry under
    /// `inversion = "forbid"`).
    pub substeps: usize,
    /// Inverted elements and obstacle penetrations at the step's end, per body.
    pub check: crate::problem::StateCheck,
    /// Why the step failed, when it did (e.g. no solve could keep every element positive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// One line per violated invariant (naming the step, the count and the objects), for the
    /// user.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Final characteristic-norm residual (converged under `--stop cn` when < ε).
    pub residual: f64,
    /// Final incremental potential E, J (carries the inertia term's constant: at large h it is
    /// dominated by ½‖h²g‖²_M; compare [`StepReport::energy_change`] instead).
    pub energy: f64,
    /// E(x_end) − E(x_start), J: what the step's iterations took off the incremental potential,
    /// evaluated per element and per vertex (≤ 0 for every descent solver).
    pub energy_change: f64,
    /// Wall time of the step, ms.
    pub wall_ms: f64,
    /// Time split.
    pub timings: StepTimings,
    /// Inner-solver work (CG iterations, line-search trials, refactorisations, ADMM residuals).
    pub work: StepWork,
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
