//! Backtracking line search on the true energy, from the step filter of
//! [`StepProblem::step_limit`].

use crate::problem::{ElasticTerms, StepProblem};

/// Outcome of a line search.
#[derive(Clone, Debug)]
pub struct LineSearchResult {
    /// Accepted step length (0 when nothing was accepted).
    pub alpha: f64,
    /// Energy at the accepted point relative to the step's initial guess
    /// ([`StepProblem::energy_change`]), J.
    pub energy: f64,
    /// Whether sufficient decrease was met.
    pub accepted: bool,
    /// Trial points evaluated.
    pub trials: usize,
}

/// Armijo backtracking from `x` along `dx`: starts at the filter's limit, halves until
/// E(x + α dx) ≤ E(x) + c α gᵀdx with c = 1e-4, at most 40 halvings. On success `x_new` holds
/// the accepted point.
///
/// Energies are the step's energy changes ([`StepProblem::energy_change`], `e0` = that of `x`),
/// summed per element and per vertex, so the comparison never depends on the incremental
/// potential's absolute size (at h = 1e5 s a 1 m beam's E carries ~5e12 J of inertia constant,
/// and a relative slack on E accepted real increases of 0.1–50 J). The round-off allowance is
/// [`StepProblem::energy_slack`].
///
/// The filter is [`StepProblem::step_limit`].
pub fn backtracking(
    problem: &StepProblem,
    elastic: &dyn ElasticTerms,
    x: &[f64],
    dx: &[f64],
    e0: f64,
    g_dot_dx: f64,
    x_new: &mut Vec<f64>,
) -> LineSearchResult {
    let mut alpha = problem.step_limit(x, dx);
    x_new.resize(x.len(), 0.0);
    let mut trials = 0;
    for _ in 0..40 {
        if alpha <= 0.0 {
            break;
        }
        for k in 0..x.len() {
            x_new[k] = x[k] + alpha * dx[k];
        }
        trials += 1;
        let e = problem.energy_change(elastic, x_new);
        // The slack absorbs round-off near convergence, where the decrease is below the last
        // digits of the summed terms.
        if e.is_finite() && e <= e0 + 1e-4 * alpha * g_dot_dx + problem.energy_slack(elastic, e0, x)
        {
            return LineSearchResult {
                alpha,
                energy: e,
                accepted: true,
                trials,
            };
        }
        alpha *= 0.5;
    }
    LineSearchResult {
        alpha: 0.0,
        energy: e0,
        accepted: false,
        trials,
    }
}
