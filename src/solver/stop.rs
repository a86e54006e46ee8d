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
    /// Short name, as accepted by `--stop`.
    pub fn name(&self) -> &'static str {
        match self {
            StopRule::Cn { .. } => "cn",
            StopRule::Dx { .. } => "dx",
        }
    }
}
