//! The Newton-type outer loop: gradient, stop test, friction passes, a direction from the
//! [`InnerSolve`], the filtered line search, κ adaptation, the trace.
//!
//! Per step:
//! ```text
//! κ balanced at x_start (IPC); friction lagged at x_start
//! g ← ∇E(x_start)
//! loop:  stop rule met (after ≥ 1 iteration)? → with friction passes left, re-lag at x and
//!                                               test again on the new potential; else stop
//!        d ← inner direction at x          (gᵀd; no descent direction ends the step)
//!        α ← backtracking from the step filter's bound;  inner learns from α
//!        x ← x + α d;  κ doubled when the gap shrank;  g ← ∇E(x)
//! ```
//! A first iteration that cannot move from a start already meeting the rule counts as
//! converged ([`StopRule`]'s docs).

use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::problem::{ElasticTerms, StepProblem};
use crate::solver::report::{max_vertex_norm, ms};
use crate::solver::{
    backtracking, IterationRecord, LineSearchResult, StepReport, StepTimings, StepWork, StopRule,
};

/// The point one iteration starts from, for [`InnerSolve::direction`].
pub(crate) struct Iterate<'a> {
    /// The step's potential.
    pub problem: &'a StepProblem<'a>,
    /// Its elastic terms.
    pub elastic: &'a dyn ElasticTerms,
    /// Current positions (3n, m).
    pub x: &'a [f64],
    /// ∇E at `x` (3n, N; zero on pinned DOFs).
    pub g: &'a [f64],
    /// The iteration's number within the step (1 for the first).
    pub iteration: usize,
}

/// What a Newton-type solver supplies to [`newton_loop`]: its direction, its stop rule and
/// what it learns from each accepted step.
pub(crate) trait InnerSolve {
    /// Iteration cap per step.
    fn max_iterations(&self) -> usize;
    /// Largest extent of the model's rest bounding box (m), the Dx rule's unit.
    fn extent(&self) -> f64;
    /// Starts a step (after the start's gradient was found finite).
    fn begin_step(&mut self, problem: &StepProblem) -> Result<()>;
    /// Whether the stop rule holds at a point of characteristic-norm residual `residual`,
    /// reached by an iteration whose largest vertex move was `moved` times
    /// [`Self::extent`] (`None` where no iteration led to the point: the step's start, or a
    /// point whose potential just changed).
    fn stop_met(&self, residual: f64, moved: Option<f64>) -> bool;
    /// The direction at `at` into `d` (3n, m; resized as needed); `Some(gᵀd)`, or `None` when
    /// no descent direction was found (the step ends, reported as not converged unless its
    /// start met the rule). Adds its time to `timings` and its work to `work`.
    fn direction(
        &mut self,
        at: &Iterate,
        d: &mut Vec<f64>,
        timings: &mut StepTimings,
        work: &mut StepWork,
    ) -> Result<Option<f64>>;
    /// The line search from `x` along `d` ([`backtracking`] by default). `e0` is the energy
    /// change at `x`; `exact` says whether it is the f64 potential's value, and a line search
    /// that decides in another precision updates it for the point it accepts.
    #[allow(clippy::too_many_arguments)]
    fn line_search(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &[f64],
        d: &[f64],
        e0: f64,
        exact: &mut bool,
        g_dot_d: f64,
        x_new: &mut Vec<f64>,
    ) -> Result<LineSearchResult> {
        let _ = exact;
        Ok(backtracking(problem, elastic, x, d, e0, g_dot_d, x_new))
    }
    /// An accepted step `ls.alpha · d` from `x` (still the old point), whose energy change was
    /// `e0` (J); what the solver learns from it. Adds its time to `timings`.
    #[allow(clippy::too_many_arguments)]
    fn accepted(
        &mut self,
        problem: &StepProblem,
        x: &[f64],
        d: &[f64],
        g_dot_d: f64,
        e0: f64,
        ls: &LineSearchResult,
        timings: &mut StepTimings,
    );
    /// Ends a step of `iterations` iterations: the solver's own counts into `work`.
    fn finish(&mut self, iterations: usize, work: &mut StepWork) {
        let _ = (iterations, work);
    }
}

/// One step of a Newton-type solver from `problem.x_start` into `x` (see the module docs).
pub(crate) fn newton_loop<S: InnerSolve + ?Sized>(
    inner: &mut S,
    problem: &StepProblem,
    elastic: &dyn ElasticTerms,
    x: &mut Vec<f64>,
    trace: bool,
) -> Result<StepReport> {
    let start = Instant::now();
    let mut timings = StepTimings::default();
    let mut work = StepWork::default();
    let n = problem.x_start.len();
    x.clear();
    x.extend_from_slice(&problem.x_start);
    let contact = problem.model.contact.is_some();
    // IPC's κ: balanced against the potential's gradient at the start (no-op without
    // contact), always from the f64 elastic terms: a run whose elastic terms are f32
    // kernels then starts each step with the κ of the CPU reference, not one a rounding
    // apart (κ sets how far apart the surfaces rest, up to d̂). Friction lagged at the
    // step's start (IPC: normal forces and tangent frames of the pairs active at xᵗ, with
    // this step's κ); each further pass re-lags at the converged point.
    let mut passes_left = problem.begin_contact_step(problem.model);
    let mut min_gap_sq = f64::INFINITY;
    let mut g = vec![0.0; n];
    let mut d = vec![0.0; n];
    let mut x_new = Vec::with_capacity(n);
    let t0 = Instant::now();
    let mut energy = problem.gradient(elastic, x, &mut g);
    timings.assembly_ms += ms(t0);
    if !energy.is_finite() || g.iter().any(|v| !v.is_finite()) {
        return Err(JelloError::Solver(problem.diagnose_non_finite(elastic, x)));
    }
    inner.begin_step(problem)?;
    // E − E(x_start), exactly 0 here; the line search returns it for every accepted point.
    let mut change = 0.0;
    // Whether `change` is the f64 potential's value (a device line search's is not).
    let mut change_exact = true;
    let mut residual = problem.model.char_norm.residual(&g);
    let mut records = trace.then(Vec::new);
    if let Some(r) = records.as_mut() {
        r.push(IterationRecord {
            residual,
            energy: change,
            alpha: 0.0,
            ..IterationRecord::default()
        });
    }
    let max_iterations = inner.max_iterations();
    let start_converged = inner.stop_met(residual, None);
    let mut converged;
    let mut iterations = 0;
    let mut moved = None;
    loop {
        converged = inner.stop_met(residual, moved);
        if converged && iterations > 0 && passes_left > 0 {
            // Another lagging pass: friction's normal forces and frames from this solution.
            passes_left -= 1;
            if problem.lag_friction(x) > 0 {
                change = problem.energy_change(elastic, x);
                change_exact = true;
                energy = problem.gradient(elastic, x, &mut g);
                residual = problem.model.char_norm.residual(&g);
                // Dx needs a step under the new potential; CN can stop at once.
                converged = inner.stop_met(residual, None);
            }
        }
        if StopRule::stop_now(converged, iterations, max_iterations) {
            break;
        }
        iterations += 1;
        let at = Iterate {
            problem,
            elastic,
            x,
            g: &g,
            iteration: iterations,
        };
        let Some(g_dot_d) = inner.direction(&at, &mut d, &mut timings, &mut work)? else {
            converged = iterations == 1 && start_converged;
            break;
        };
        let t0 = Instant::now();
        let ls = inner.line_search(
            problem,
            elastic,
            x,
            &d,
            change,
            &mut change_exact,
            g_dot_d,
            &mut x_new,
        )?;
        timings.line_search_ms += ms(t0);
        work.line_search_trials += ls.trials;
        if !ls.accepted {
            // No decrease possible along the direction: report, do not hide — unless the
            // start already met the rule and only round-off is left.
            converged = iterations == 1 && start_converged;
            break;
        }
        inner.accepted(problem, x, &d, g_dot_d, change, &ls, &mut timings);
        moved = Some(max_vertex_norm(&d) * ls.alpha / inner.extent());
        std::mem::swap(x, &mut x_new);
        change = ls.energy;
        if contact && problem.raise_contact_stiffness(x, &mut min_gap_sq) {
            // κ doubled: the objective changed, so its value relative to x_start does too.
            change = problem.energy_change(elastic, x);
            change_exact = true;
        }
        let t0 = Instant::now();
        energy = problem.gradient(elastic, x, &mut g);
        timings.assembly_ms += ms(t0);
        residual = problem.model.char_norm.residual(&g);
        if let Some(r) = records.as_mut() {
            r.push(IterationRecord {
                residual,
                energy: change,
                alpha: ls.alpha,
                ..IterationRecord::default()
            });
        }
    }
    inner.finish(iterations, &mut work);
    Ok(StepReport {
        iterations,
        converged,
        residual,
        energy,
        energy_change: change,
        wall_ms: ms(start),
        timings,
        work,
        trace: records,
        ..StepReport::default()
    })
}
