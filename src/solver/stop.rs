//! Stopping rules shared by every solver.

use serde::{Deserialize, Serialize};

/// When a solver stops iterating.
///
/// Every step takes at least one iteration before the rule is checked: when the loads are
/// small against the stiffness (a stiff beam under its own weight) the start of a step can
/// already be within the tolerance, and stopping there with no iteration every step would keep
/// the body frozen instead of letting it sag. A first iteration that can make no progress
/// (round-off) from a start that already meets the rule still counts as converged.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum StopRule {
    /// Characteristic gradient norm (see [`crate::problem::CharacteristicNorm`]): stop when the
    /// residual ‖(∇E_v/c_v)_free‖ / (‖ℓ‖√(n_free/n)) < `eps` (default 1e-5). Every comparison
    /// with Newton uses this rule.
    Cn {
        /// ε, dimensionless.
        eps: f64,
    },
    /// The JGS2 paper's rule: stop when the largest per-vertex position change of an iteration,
    /// in units of the scene's largest bounding-box side, is below `tol` (default 1e-3).
    Dx {
        /// Tolerance, fraction of the scene's largest extent.
        tol: f64,
    },
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule::Cn { eps: 1e-5 }
    }
}

impl StopRule {
    /// Whether the rule holds at a point with characteristic-norm residual `residual` reached
    /// by an iteration whose largest vertex move was `move_ratio` times the scene's largest
    /// extent. Pass `f64::INFINITY` where no iteration led to the point (the step's start, or
    /// a point whose potential just changed, as when friction is lagged anew): there only
    /// [`StopRule::Cn`] can hold.
    pub fn met(&self, residual: f64, move_ratio: f64) -> bool {
        match *self {
            StopRule::Cn { eps } => residual < eps,
            StopRule::Dx { tol } => move_ratio < tol,
        }
    }

    /// Whether a loop stops before its next iteration, having done `iterations` of at most
    /// `cap`: the rule is `met` and at least one iteration was taken (see the type docs), or
    /// the cap is reached.
    pub fn stop_now(met: bool, iterations: usize, cap: usize) -> bool {
        (met && iterations > 0) || iterations >= cap
    }

    /// Short name, as accepted by `--stop`.
    pub fn name(&self) -> &'static str {
        match self {
            StopRule::Cn { .. } => "cn",
            StopRule::Dx { .. } => "dx",
        }
    }
}

/// How an iterative step decides it is done: by the stop rule, or after a fixed count. Shared
/// by the L-BFGS loop and the solvers built on it (QN, DOT) and by ADMM, so that the generic
/// loop in [`crate::solver::lbfgs`] depends on no solver built on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QnMode {
    /// jello's shared stop rule (the solver's `stop`, `--stop cn|dx`) with an iteration cap
    /// (its `max_iterations`) — the default, and what every comparison uses.
    Rule,
    /// The paper's fixed iteration count per step (Table I: 10). The step reports
    /// `converged` as the stop rule's verdict on where it ended.
    Fixed(usize),
}
